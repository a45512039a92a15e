import Foundation
import Memwarn

/// A child process forked from a thread of its own, which then waits for it: the thread lives
/// exactly as long as the child, so a child that asked for a parent-death signal (which the
/// kernel ties to the forking *thread*) gets it only when this process dies.
final class WaitedChild: Sendable {
    /// The child's pid.
    let pid: Int32
    private let ending = Locked<(exit: ProcessExit?, waiter: CheckedContinuation<ProcessExit, Never>?)>((nil, nil))

    /// Runs `spawn` (a fork returning the pid, or -errno) on a new thread and waits there for
    /// the child it made.
    ///
    /// - Throws: ``ConstrainedRun/StartError`` when the fork failed.
    init(_ spawn: @escaping @Sendable () -> Int32) throws {
        let started = DispatchSemaphore(value: 0)
        let forked = Locked<Int32>(0)
        let ending = self.ending
        Thread.detachNewThread {
            let pid = spawn()
            forked.withLock { $0 = pid }
            started.signal()
            guard pid > 0 else { return }
            var status: Int32 = 0
            while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
            let signal = status & 0x7f
            let exit = signal == 0 ? ProcessExit(status: (status >> 8) & 0xff) : ProcessExit(signal: signal)
            let waiter = ending.withLock { ending in
                ending.exit = exit
                defer { ending.waiter = nil }
                return ending.waiter
            }
            waiter?.resume(returning: exit)
        }
        started.wait()
        pid = forked.withLock { $0 }
        guard pid > 0 else { throw ConstrainedRun.StartError(description: "fork failed: \(String(cString: strerror(-pid)))") }
    }

    /// How the child ended, once it has.
    func exit() async -> ProcessExit {
        await withCheckedContinuation { continuation in
            let done = ending.withLock { ending in
                if ending.exit == nil { ending.waiter = continuation }
                return ending.exit
            }
            if let done { continuation.resume(returning: done) }
        }
    }
}

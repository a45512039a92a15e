#if canImport(Glibc)
import Glibc
#endif

/// A child process started from a thread of its own, which then waits for it: the thread lives
/// exactly as long as the child, so a child that asked for a parent-death signal (which the
/// kernel ties to the forking *thread*) gets it only when this process dies, and the child is
/// always reaped, whether anyone asks how it ended or not.
package final class WaitedChild: Sendable {
    private struct Ending {
        var exit: ProcessExit?
        var waiters: [CheckedContinuation<ProcessExit, Never>] = []
    }

    /// The child's pid.
    package let pid: Int32
    private let ending = ConditionLock(Ending())

    /// Starts `spawn` on a new thread, which waits there for the child.
    ///
    /// - Throws: ``SystemError`` from the spawn, or from `pthread_create`.
    package init(_ spawn: ChildSpawn) throws(SystemError) {
        let started = ConditionLock<Result<Int32, SystemError>?>(nil)
        let ending = self.ending
        try SystemThread.start(name: "memwarn-child") {
            let outcome = Result { () throws(SystemError) in try spawn.start() }
            started.withLock { $0 = outcome }
            guard case .success(let pid) = outcome else { return }
            // Wait without reaping, then reap and record under the lock: while the exit is not
            // recorded the pid is still the child's, so ``signal(_:)`` never hits a reused pid.
            var info = siginfo_t()
            while waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT) != 0 && errno == EINTR {}
            let (exit, waiters) = ending.withLock { ending in
                let exit = (try? ProcessExit.wait(for: pid)) ?? ProcessExit()
                ending.exit = exit
                defer { ending.waiters = [] }
                return (exit, ending.waiters)
            }
            for waiter in waiters { waiter.resume(returning: exit) }
        }
        pid = try started.wait(timeout: nil) { $0 }!.get()
    }

    /// How the child ended, once it has.
    package func exit() async -> ProcessExit {
        await withCheckedContinuation { continuation in
            let done = ending.withLock { ending in
                if ending.exit == nil { ending.waiters.append(continuation) }
                return ending.exit
            }
            if let done { continuation.resume(returning: done) }
        }
    }

    /// How the child ended, if it has by now.
    package var exitIfEnded: ProcessExit? { ending.withLock { $0.exit } }

    /// Blocks the calling thread until the child has ended, for at most `timeout`.
    ///
    /// - Returns: how it ended, or `nil` when it still runs after `timeout`.
    package func waitForExit(timeout: Duration? = nil) -> ProcessExit? {
        ending.wait(timeout: timeout) { $0.exit }
    }

    /// Sends the child a signal, unless it has been reaped (its pid may be another's by then).
    package func signal(_ number: Int32) {
        ending.withLock { ending in
            if ending.exit == nil { try? Signals.send(number, to: pid) }
        }
    }

    /// Sends a signal to the child's process group (a child spawned with
    /// ``ChildSpawn/newProcessGroup``): the child and what it started. Once the child is reaped
    /// the group may live on (its members keep its id, which no new group can take while they
    /// live), so this also reaches what the child left behind.
    package func signalGroup(_ number: Int32) {
        try? Signals.send(number, to: -pid)
    }
}

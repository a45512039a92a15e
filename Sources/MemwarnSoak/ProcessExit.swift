import Foundation

/// How a child process ended.
public struct ProcessExit: Sendable, Hashable, Codable {
    /// Its exit status, when it exited.
    public var status: Int32?
    /// The signal that killed it, when one did.
    public var signal: Int32?

    /// The shell's convention: the status, or 128 + the signal.
    public var code: Int32 { signal.map { 128 + $0 } ?? status ?? 0 }

    /// Waits for a child of this process on a thread of its own (a blocking `waitpid` must
    /// not hold one of the few threads Swift's tasks run on).
    static func wait(for pid: Int32) async -> ProcessExit {
        await withCheckedContinuation { continuation in
            Thread.detachNewThread {
                var status: Int32 = 0
                while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
                let signal = status & 0x7f
                continuation.resume(returning: signal == 0 ? ProcessExit(status: (status >> 8) & 0xff) : ProcessExit(signal: signal))
            }
        }
    }

    public init(status: Int32? = nil, signal: Int32? = nil) {
        self.status = status
        self.signal = signal
    }
}

#if canImport(Glibc)
import Glibc
#endif

/// How a child process ended (public: `memwarn run`'s and the soak's reports carry it).
package struct ProcessExit: Sendable, Hashable, Codable {
    /// Its exit status, when it exited.
    package var status: Int32?
    /// The signal that killed it, when one did.
    package var signal: Int32?

    /// - Parameters:
    ///   - status: its exit status, when it exited.
    ///   - signal: the signal that killed it, when one did.
    package init(status: Int32? = nil, signal: Int32? = nil) {
        self.status = status
        self.signal = signal
    }

    /// The shell's convention: the status, or 128 + the signal.
    package var code: Int32 { signal.map { 128 + $0 } ?? status ?? 0 }

    /// Waits for the child `pid` to end (`waitpid`, retried on `EINTR`).
    ///
    /// - Throws: ``SystemError`` from `waitpid` (`ECHILD`: not a child of this process, or
    ///   already waited for).
    package static func wait(for pid: Int32) throws(SystemError) -> ProcessExit {
        var status: Int32 = 0
        try Syscall.retrying("waitpid") { waitpid(pid, &status, 0) }
        let signal = status & 0x7f
        return signal == 0 ? ProcessExit(status: (status >> 8) & 0xff) : ProcessExit(signal: signal)
    }
}

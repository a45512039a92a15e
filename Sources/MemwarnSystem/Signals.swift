#if canImport(Glibc)
import Glibc
#endif

/// Signals to other processes (`kill`), and whether a process exists.
package enum Signals {
    /// Sends `signal` to the process `pid` (a negative `pid` names a process group; 0 is this
    /// process's own group, which callers that read pids from the kernel must guard against).
    ///
    /// - Parameters:
    ///   - signal: the signal, such as `SIGKILL`, or 0 to send none and only check.
    ///   - pid: the process.
    /// - Throws: ``SystemError`` from `kill` (`ESRCH`: no such process; `EPERM`: it exists but
    ///   this process may not signal it).
    package static func send(_ signal: Int32, to pid: Int32) throws(SystemError) {
        try Syscall.retrying("kill") { kill(pid, signal) }
    }

    /// Whether a process with this pid exists in this PID namespace, whoever's it is: `kill`
    /// with signal 0 succeeds, or fails with anything but `ESRCH` (`EPERM`: it is another
    /// user's). A pid the kernel has since given to another process counts as existing.
    package static func processExists(_ pid: Int32) -> Bool {
        kill(pid, 0) == 0 || errno != ESRCH
    }
}

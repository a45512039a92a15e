import CLinuxCalls

#if canImport(Glibc)
import Glibc
#endif

/// A process watched for its end: a pidfd (`pidfd_open`, Linux 5.3), which becomes readable when
/// the process exits. Watch ``descriptor`` on an ``EventLoop``; closed when this is released.
package final class ProcessEndWatch {
    /// The pidfd.
    package let descriptor: FileDescriptor
    /// The process watched.
    package let pid: Int32

    /// Opens a pidfd for `pid`.
    ///
    /// - Throws: ``SystemError``: `ESRCH` when no such process exists (it ended already),
    ///   `ENOSYS` on a kernel without pidfds, `EINVAL` for a pid of 0 (a peer in another pid namespace).
    package init(pid: Int32) throws(SystemError) {
        guard pid > 0 else { throw SystemError("pidfd_open", errno: EINVAL) }
        descriptor = FileDescriptor(adopting: try Syscall.retrying("pidfd_open") { memwarn_pidfd_open(pid) })
        self.pid = pid
    }
}

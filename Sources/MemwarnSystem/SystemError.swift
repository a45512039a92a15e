#if canImport(Glibc)
import Glibc
#endif

/// A system call that failed: the call's name, the `errno` it left, and the file it concerned.
///
/// Every call of the system layer reports failure with one of these; the layers above turn it
/// into their own public errors (`CgroupError`, `ControlError`, `MonitorError`), keeping the
/// `errno` and the call's name.
package struct SystemError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The call that failed, such as `epoll_ctl(ADD)` or `open`.
    package var call: String
    /// The `errno` it left.
    package var errno: Int32
    /// The file or socket it concerned, when there is one.
    package var path: String?

    /// An error for `call`, with `errno` as it is now unless given.
    package init(_ call: String, errno: Int32 = Glibc.errno, path: String? = nil) {
        self.call = call
        self.errno = errno
        self.path = path
    }

    /// The C library's words for the `errno`, such as "Too many open files".
    package var reason: String { String(cString: strerror(errno)) }

    /// Whether the failure may pass by itself: the process or the system ran out of file
    /// descriptors (`EMFILE`, `ENFILE`) or memory (`ENOMEM`), or the call was interrupted or
    /// would have blocked (`EINTR`, `EAGAIN`).
    package var isTransient: Bool { Self.transientErrnos.contains(errno) }

    /// The `errno` values of `isTransient`.
    package static let transientErrnos: Set<Int32> = [EMFILE, ENFILE, ENOMEM, EINTR, EAGAIN]

    package var description: String {
        "\(call)\(path.map { " \($0)" } ?? "") failed: \(reason)"
    }
}

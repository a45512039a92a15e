import MemwarnSystem

/// A failure of a control endpoint, or of a request sent to one.
public struct ControlError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong, in one line.
    public var message: String
    /// The `errno` behind it, when a system call failed.
    public var errno: Int32?

    /// Creates an error with its message.
    ///
    /// - Parameter message: what went wrong, in one line.
    public init(_ message: String) {
        self.message = message
    }

    /// A system call that failed, such as `bind /run/user/0/memwarn/7.sock failed: Permission denied`.
    init(_ error: SystemError) {
        message = error.description
        errno = error.errno
    }

    public var description: String { message }
}

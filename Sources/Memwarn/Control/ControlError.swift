#if canImport(Glibc)
import Glibc
#endif

/// A failure of a control endpoint, or of a request sent to one.
public struct ControlError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong, in one line.
    public var message: String

    /// Creates an error with its message.
    ///
    /// - Parameter message: what went wrong, in one line.
    public init(_ message: String) {
        self.message = message
    }

    public var description: String { message }

    /// The failed call and `errno`'s text, such as `bind /run/user/0/memwarn/7.sock: Permission denied`.
    static func system(_ call: String, _ path: String, errno code: Int32 = errno) -> ControlError {
        ControlError("\(call) \(path): \(String(cString: strerror(code)))")
    }
}

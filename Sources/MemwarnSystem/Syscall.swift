#if canImport(Glibc)
import Glibc
#endif

/// The one way the system layer makes a call: retried while it is interrupted (`EINTR`), and
/// turned into a ``SystemError`` naming the call when it fails.
package enum Syscall {
    /// Calls `body` until it is not interrupted; a result of -1 is a failure.
    ///
    /// - Parameters:
    ///   - call: the call's name, for the error.
    ///   - path: the file or socket concerned, for the error.
    ///   - body: the call; it returns -1 and sets `errno` on failure.
    /// - Returns: what `body` returned.
    /// - Throws: ``SystemError`` with `errno` when `body` returned -1 other than for `EINTR`.
    @discardableResult
    package static func retrying<Result: FixedWidthInteger>(
        _ call: String, path: String? = nil,
        _ body: () -> Result
    ) throws(SystemError) -> Result {
        while true {
            let result = body()
            if result != -1 { return result }
            guard errno == EINTR else { throw SystemError(call, path: path) }
        }
    }

    /// ``retrying(_:path:_:)`` for a non-blocking call: `nil` when it would block (`EAGAIN`).
    package static func nonBlocking<Result: FixedWidthInteger>(
        _ call: String, path: String? = nil,
        _ body: () -> Result
    ) throws(SystemError) -> Result? {
        do {
            return try retrying(call, path: path, body)
        } catch  where error.errno == EAGAIN || error.errno == EWOULDBLOCK {
            return nil
        }
    }
}

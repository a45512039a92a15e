import MemwarnSystem

/// A failure of a control endpoint, or of a request sent to one.
///
/// Match on ``code`` to handle a kind of failure (new codes may be added); ``message`` says what
/// went wrong in one line, and ``file`` and ``line`` where it was thrown. Two errors are equal
/// when their code, message and `errno` are, wherever they were thrown.
package struct ControlError: Error, Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible {
    /// The kind of failure.
    package struct Code: Sendable, Hashable, CustomStringConvertible {
        private enum Base: String, Sendable, Hashable {
            case malformedRequest, malformedReply, unexpectedReply, untrusted, endpointReplaced, noEndpoint, timedOut
            case connectionClosed, pathTooLong, refused, serviceOutOfScope, serviceUnreadable, systemCallFailed
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// A request line that is not one the endpoint knows, or has a member missing, of the
        /// wrong type or out of range.
        package static let malformedRequest = Code(.malformedRequest)
        /// A reply that is not JSON the client can read, or longer than a reply may be.
        package static let malformedReply = Code(.malformedReply)
        /// A reply that does not answer the request (a status where a release report was due).
        package static let unexpectedReply = Code(.unexpectedReply)
        /// The endpoint, its socket or its directory belongs to someone this process does not
        /// trust (another user), or its credentials cannot be read.
        package static let untrusted = Code(.untrusted)
        /// Another process than the one asked listens on the socket now (the service ended and
        /// its pid's socket was taken over).
        package static let endpointReplaced = Code(.endpointReplaced)
        /// No endpoint answers: no process, no socket, or nothing listens on it.
        package static let noEndpoint = Code(.noEndpoint)
        /// The request or its reply did not complete in time.
        package static let timedOut = Code(.timedOut)
        /// The endpoint closed the connection without a reply.
        package static let connectionClosed = Code(.connectionClosed)
        /// The socket's path is longer than a Unix socket address holds.
        package static let pathTooLong = Code(.pathTooLong)
        /// The endpoint refused the request, saying why.
        package static let refused = Code(.refused)
        /// The service is not one the asker serves (a node agent: its cgroup is not under the
        /// agent's parent).
        package static let serviceOutOfScope = Code(.serviceOutOfScope)
        /// The memory cgroup of the process behind an endpoint cannot be read, or it has none.
        package static let serviceUnreadable = Code(.serviceUnreadable)
        /// A system call failed (`errno` says how).
        package static let systemCallFailed = Code(.systemCallFailed)

        package var description: String { base.rawValue }
    }

    /// The fields, their description and their equality (shared with the package's other errors).
    private var backing: ErrorBacking<Code>

    /// The kind of failure.
    package var code: Code {
        get { backing.code }
        set { backing.code = newValue }
    }
    /// What went wrong, in one line.
    package var message: String {
        get { backing.message }
        set { backing.message = newValue }
    }
    /// The `errno` behind it, when a system call failed.
    package var errno: Int32? {
        get { backing.errno }
        set { backing.errno = newValue }
    }
    /// The source file that threw it (`#fileID`).
    package var file: String {
        get { backing.file }
        set { backing.file = newValue }
    }
    /// The line that threw it.
    package var line: Int {
        get { backing.line }
        set { backing.line = newValue }
    }

    /// Creates an error.
    ///
    /// - Parameters:
    ///   - code: the kind of failure.
    ///   - message: what went wrong, in one line.
    ///   - errno: the `errno` behind it, when a system call failed.
    ///   - file: where it is thrown; the default is the caller's.
    ///   - line: where it is thrown; the default is the caller's.
    package init(_ code: Code, _ message: String, errno: Int32? = nil, file: String = #fileID, line: Int = #line) {
        backing = ErrorBacking(code, message, errno: errno, file: file, line: line)
    }

    /// A system call that failed, such as `bind /run/user/0/memwarn/7.sock failed: Permission denied`.
    init(_ error: SystemError, file: String = #fileID, line: Int = #line) {
        self.init(.systemCallFailed, error.description, errno: error.errno, file: file, line: line)
    }

    /// The message.
    package var description: String { backing.description }

    /// The message, the code and where it was thrown.
    package var debugDescription: String { backing.debugDescription }

    package static func == (lhs: ControlError, rhs: ControlError) -> Bool { lhs.backing == rhs.backing }

    package func hash(into hasher: inout Hasher) { hasher.combine(backing) }
}

/// What every public error of the package holds, kept in one place (as swift-service-lifecycle's
/// `ServiceGroupError` keeps its own in a backing): its code, its message, the file it concerns,
/// the `errno` behind it and where it was thrown. An error (`CgroupError`, `ControlError`,
/// `MediaError`, `PolicyError`, `LifeCycleError`, `MonitorError`) stores one of these and reads
/// its public properties, its description, its debug description and its equality from it.
package struct ErrorBacking<Code: Hashable & Sendable & CustomStringConvertible>: Hashable, Sendable, CustomStringConvertible,
    CustomDebugStringConvertible
{
    /// How the description shows ``path``.
    package enum PathShown: Sendable {
        /// Whole.
        case whole
        /// Whole up to 256 characters, else its start and end around the number of characters
        /// left out (a 5,000-character path is not echoed back whole).
        case shortened
    }

    /// The kind of failure.
    package var code: Code
    /// What went wrong, in words.
    package var message: String
    /// The file or directory concerned, when there is one: the description starts with it.
    package var path: String?
    /// The `errno` behind the failure, when a system call failed.
    package var errno: Int32?
    /// The source file that threw it (`#fileID`).
    package var file: String
    /// The line that threw it.
    package var line: Int
    /// How the description shows ``path``.
    package var pathShown: PathShown

    /// A backing.
    ///
    /// - Parameters:
    ///   - code: the kind of failure.
    ///   - message: what went wrong, in words.
    ///   - path: the file or directory concerned.
    ///   - errno: the `errno` behind the failure.
    ///   - file: where it is thrown.
    ///   - line: where it is thrown.
    ///   - pathShown: how the description shows `path`.
    package init(
        _ code: Code, _ message: String, path: String? = nil, errno: Int32? = nil, file: String, line: Int, pathShown: PathShown = .whole
    ) {
        self.code = code
        self.message = message
        self.path = path
        self.errno = errno
        self.file = file
        self.line = line
        self.pathShown = pathShown
    }

    /// `path: message`, or the message alone when there is no path.
    package var description: String {
        guard let path else { return message }
        switch pathShown {
        case .whole: return "\(path): \(message)"
        case .shortened: return "\(Self.shortened(path)): \(message)"
        }
    }

    /// The description, the code and where it was thrown.
    package var debugDescription: String { "\(description) [\(code), thrown at \(file):\(line)]" }

    /// Two errors are equal when their code, message, path and `errno` are, wherever they were thrown.
    package static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.code == rhs.code && lhs.message == rhs.message && lhs.path == rhs.path && lhs.errno == rhs.errno
    }

    package func hash(into hasher: inout Hasher) {
        hasher.combine(code)
        hasher.combine(message)
        hasher.combine(path)
        hasher.combine(errno)
    }

    /// `path` as ``PathShown/shortened`` shows it.
    package static func shortened(_ path: String) -> String {
        guard path.count > 256 else { return path }
        return "\(path.prefix(120))…(\(path.count - 240) characters)…\(path.suffix(120))"
    }
}

import MemwarnSystem

/// An error from reading, parsing or changing a cgroup or a kernel file.
///
/// Every error names the file or cgroup it concerns, so a message such as
/// `/sys/fs/cgroup/memory/app/memory.stat: line 3 has no value` is enough to act on.
/// Match on ``code`` to handle a kind of failure; new codes may be added. ``file`` and ``line``
/// say where it was thrown; two errors are equal when all else is, wherever they were thrown.
public struct CgroupError: Error, Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible {
    /// The kind of failure.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private enum Base: String, Sendable, Hashable {
            case unreadable, unwritable, malformed, notFound, noMemoryController
            case outsideNamespace, permissionDenied, libcgroup, unsupported
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// A file could not be opened or read.
        public static let unreadable = Code(.unreadable)
        /// A control file could not be opened or written.
        public static let unwritable = Code(.unwritable)
        /// A file's content is not in the format the kernel documents (empty, truncated,
        /// garbage, a number out of range, or larger than any kernel file of its kind).
        public static let malformed = Code(.malformed)
        /// The cgroup or file does not exist (also: a cgroup deleted under us).
        public static let notFound = Code(.notFound)
        /// No memory controller is mounted, or it is not enabled for this cgroup.
        public static let noMemoryController = Code(.noMemoryController)
        /// The cgroup lies outside this process's cgroup namespace and cannot be named.
        public static let outsideNamespace = Code(.outsideNamespace)
        /// The kernel refused the operation for lack of permission.
        public static let permissionDenied = Code(.permissionDenied)
        /// libcgroup returned an error.
        public static let libcgroup = Code(.libcgroup)
        /// The kernel or the layout does not support the operation.
        public static let unsupported = Code(.unsupported)

        public var description: String { base.rawValue }
    }

    /// The kind of failure.
    public var code: Code
    /// What went wrong, in words.
    public var message: String
    /// The file or cgroup directory concerned.
    public var path: String?
    /// The `errno` behind the failure, when a system call failed.
    public var errno: Int32?
    /// The source file that threw it (`#fileID`).
    public var file: String
    /// The line that threw it.
    public var line: Int

    /// Creates an error.
    ///
    /// - Parameters:
    ///   - code: the kind of failure.
    ///   - message: what went wrong, in words.
    ///   - path: the file or cgroup directory concerned.
    ///   - errno: the `errno` behind the failure, when a system call failed.
    ///   - file: where it is thrown; the default is the caller's.
    ///   - line: where it is thrown; the default is the caller's.
    public init(_ code: Code, _ message: String, path: String? = nil, errno: Int32? = nil, file: String = #fileID, line: Int = #line) {
        self.code = code
        self.message = message
        self.path = path
        self.errno = errno
        self.file = file
        self.line = line
    }

    /// The description, the code and where it was thrown.
    public var debugDescription: String { "\(description) [\(code), thrown at \(file):\(line)]" }

    public static func == (lhs: CgroupError, rhs: CgroupError) -> Bool {
        lhs.code == rhs.code && lhs.message == rhs.message && lhs.path == rhs.path && lhs.errno == rhs.errno
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(code)
        hasher.combine(message)
        hasher.combine(path)
        hasher.combine(errno)
    }

    /// Whether the failure may pass by itself: the process or the system ran out of file
    /// descriptors (`EMFILE`, `ENFILE`) or memory (`ENOMEM`), or a call was interrupted or
    /// would have blocked (`EINTR`, `EAGAIN`). A monitor retries these; it stops on the others.
    public var isTransient: Bool {
        guard let errno else { return false }
        return SystemError.transientErrnos.contains(errno)
    }

    public var description: String {
        path.map { "\(Self.shortened($0)): \(message)" } ?? message
    }

    /// A path as a message shows it: whole up to 256 characters, else its start and end around
    /// the number of characters left out (a 5,000-character path is not echoed back whole).
    static func shortened(_ path: String) -> String {
        guard path.count > 256 else { return path }
        return "\(path.prefix(120))…(\(path.count - 240) characters)…\(path.suffix(120))"
    }
}

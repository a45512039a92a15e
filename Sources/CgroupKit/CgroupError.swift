import MemwarnSystem

/// An error from reading, parsing or changing a cgroup or a kernel file.
///
/// Every error names the file or cgroup it concerns, so a message such as
/// `/sys/fs/cgroup/memory/app/memory.stat: line 3 has no value` is enough to act on.
/// Match on ``code`` to handle a kind of failure; new codes may be added. ``file`` and ``line``
/// say where it was thrown; two errors are equal when all else is, wherever they were thrown.
package struct CgroupError: Error, Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible {
    /// The kind of failure.
    package struct Code: Sendable, Hashable, CustomStringConvertible {
        private enum Base: String, Sendable, Hashable {
            case unreadable, unwritable, malformed, notFound, noMemoryController
            case outsideNamespace, permissionDenied, libcgroup, unsupported
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// A file could not be opened or read.
        package static let unreadable = Code(.unreadable)
        /// A control file could not be opened or written.
        package static let unwritable = Code(.unwritable)
        /// A file's content is not in the format the kernel documents (empty, truncated,
        /// garbage, a number out of range, or larger than any kernel file of its kind).
        package static let malformed = Code(.malformed)
        /// The cgroup or file does not exist (also: a cgroup deleted under us).
        package static let notFound = Code(.notFound)
        /// No memory controller is mounted, or it is not enabled for this cgroup.
        package static let noMemoryController = Code(.noMemoryController)
        /// The cgroup lies outside this process's cgroup namespace and cannot be named.
        package static let outsideNamespace = Code(.outsideNamespace)
        /// The kernel refused the operation for lack of permission.
        package static let permissionDenied = Code(.permissionDenied)
        /// libcgroup returned an error.
        package static let libcgroup = Code(.libcgroup)
        /// The kernel or the layout does not support the operation.
        package static let unsupported = Code(.unsupported)

        package var description: String { base.rawValue }
    }

    /// The fields, their description and their equality (shared with the package's other errors).
    private var backing: ErrorBacking<Code>

    /// The kind of failure.
    package var code: Code {
        get { backing.code }
        set { backing.code = newValue }
    }
    /// What went wrong, in words.
    package var message: String {
        get { backing.message }
        set { backing.message = newValue }
    }
    /// The file or cgroup directory concerned.
    package var path: String? {
        get { backing.path }
        set { backing.path = newValue }
    }
    /// The `errno` behind the failure, when a system call failed.
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
    ///   - message: what went wrong, in words.
    ///   - path: the file or cgroup directory concerned.
    ///   - errno: the `errno` behind the failure, when a system call failed.
    ///   - file: where it is thrown; the default is the caller's.
    ///   - line: where it is thrown; the default is the caller's.
    package init(_ code: Code, _ message: String, path: String? = nil, errno: Int32? = nil, file: String = #fileID, line: Int = #line) {
        backing = ErrorBacking(code, message, path: path, errno: errno, file: file, line: line, pathShown: .shortened)
    }

    /// The description, the code and where it was thrown.
    package var debugDescription: String { backing.debugDescription }

    package static func == (lhs: CgroupError, rhs: CgroupError) -> Bool { lhs.backing == rhs.backing }

    package func hash(into hasher: inout Hasher) { hasher.combine(backing) }

    /// Whether the failure may pass by itself: the process or the system ran out of file
    /// descriptors (`EMFILE`, `ENFILE`) or memory (`ENOMEM`), or a call was interrupted or
    /// would have blocked (`EINTR`, `EAGAIN`). A monitor retries these; it stops on the others.
    package var isTransient: Bool {
        guard let errno else { return false }
        return SystemError.transientErrnos.contains(errno)
    }

    /// The path (shortened when it is longer than 256 characters) and the message.
    package var description: String { backing.description }
}

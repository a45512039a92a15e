package import MemwarnSystem

/// Why a ``PressureMonitor`` cannot run: misuse, a bad setting, or a system call it needs that
/// failed.
///
/// Match on ``code`` to handle a kind of failure (new codes may be added); ``file`` and
/// ``line`` say where it was thrown. Two errors are equal when their code, message and `errno`
/// are, wherever they were thrown.
public struct MonitorError: Error, Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible {
    /// The kind of failure.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private enum Base: String, Sendable, Hashable {
            case alreadyRunning, badSetting, systemCallFailed
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// `run()` was called while the monitor runs.
        public static let alreadyRunning = Code(.alreadyRunning)
        /// A setting the monitor reads from the environment has a value it does not know.
        public static let badSetting = Code(.badSetting)
        /// A system call the monitor needs failed: an epoll instance, an eventfd or a thread
        /// the system refused (``MonitorError/errno`` says how).
        public static let systemCallFailed = Code(.systemCallFailed)

        public var description: String { base.rawValue }
    }

    /// The fields, their description and their equality (shared with the package's other errors).
    private var backing: ErrorBacking<Code>

    /// The kind of failure.
    public var code: Code {
        get { backing.code }
        set { backing.code = newValue }
    }
    /// What went wrong.
    public var message: String {
        get { backing.message }
        set { backing.message = newValue }
    }
    /// The `errno` behind it, when a system call failed.
    public var errno: Int32? {
        get { backing.errno }
        set { backing.errno = newValue }
    }
    /// The source file that threw it (`#fileID`).
    public var file: String {
        get { backing.file }
        set { backing.file = newValue }
    }
    /// The line that threw it.
    public var line: Int {
        get { backing.line }
        set { backing.line = newValue }
    }

    init(_ code: Code, _ message: String, file: String = #fileID, line: Int = #line) {
        backing = ErrorBacking(code, message, file: file, line: line)
    }

    /// A system call the monitor needs failed.
    package init(_ error: SystemError, file: String = #fileID, line: Int = #line) {
        backing = ErrorBacking(.systemCallFailed, "the memory monitor cannot run: \(error)", errno: error.errno, file: file, line: line)
    }

    public var description: String { backing.description }

    /// The message, the code and where it was thrown.
    public var debugDescription: String { backing.debugDescription }

    public static func == (lhs: MonitorError, rhs: MonitorError) -> Bool {
        lhs.backing == rhs.backing
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(backing)
    }
}

import MemwarnSystem

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

    /// The kind of failure.
    public var code: Code
    /// What went wrong.
    public var message: String
    /// The `errno` behind it, when a system call failed.
    public var errno: Int32?
    /// The source file that threw it (`#fileID`).
    public var file: String
    /// The line that threw it.
    public var line: Int

    init(_ code: Code, _ message: String, file: String = #fileID, line: Int = #line) {
        self.code = code
        self.message = message
        self.file = file
        self.line = line
    }

    /// A system call the monitor needs failed.
    init(_ error: SystemError, file: String = #fileID, line: Int = #line) {
        self.init(.systemCallFailed, "the memory monitor cannot run: \(error)", file: file, line: line)
        errno = error.errno
    }

    public var description: String { message }

    /// The message, the code and where it was thrown.
    public var debugDescription: String { "\(message) [\(code), thrown at \(file):\(line)]" }

    public static func == (lhs: MonitorError, rhs: MonitorError) -> Bool {
        lhs.code == rhs.code && lhs.message == rhs.message && lhs.errno == rhs.errno
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(code)
        hasher.combine(message)
        hasher.combine(errno)
    }
}

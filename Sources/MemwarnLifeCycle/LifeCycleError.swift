import MemwarnSystem

/// Why a life-cycle request was refused.
///
/// Match on ``code`` to handle a kind of refusal (new codes may be added); ``message`` says
/// what was refused and why, ``subject`` whom it concerned, and ``file`` and ``line`` where it
/// was thrown. Two errors are equal when their code, message and subject are, wherever they were
/// thrown. Made with the static functions below, named as the codes.
public struct LifeCycleError: Error, Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible {
    /// The kind of refusal.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private enum Base: String, Sendable, Hashable {
            case illegalTransition, stateNotSaved, backgroundTasksRunning, launchFailed
            case applicationTerminated, reentrantTransition, unknownUnit
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// The transition is not one of ``LifeCycleTransition/all``.
        public static let illegalTransition = Code(.illegalTransition)
        /// A unit may be suspended only once its `didEnterBackground` handler has completed:
        /// otherwise terminating it could lose what it had not saved.
        public static let stateNotSaved = Code(.stateNotSaved)
        /// A unit may be suspended only while no background task runs.
        public static let backgroundTasksRunning = Code(.backgroundTasksRunning)
        /// `willFinishLaunching` threw (or the delegate could not be made): the launch was
        /// abandoned and the subject is not running.
        public static let launchFailed = Code(.launchFailed)
        /// The application has terminated; it takes no more requests.
        public static let applicationTerminated = Code(.applicationTerminated)
        /// A callback (or a task it started, which inherits its context) asked for a transition
        /// of its own subject, which would wait for the callback to return: a deadlock, refused.
        /// To move the subject on from a callback, use `Task.detached`.
        public static let reentrantTransition = Code(.reentrantTransition)
        /// No unit has this identifier.
        public static let unknownUnit = Code(.unknownUnit)

        public var description: String { base.rawValue }
    }

    /// The fields, their description and their equality (shared with the package's other errors).
    private var backing: ErrorBacking<Code>

    /// The kind of refusal.
    public var code: Code {
        get { backing.code }
        set { backing.code = newValue }
    }
    /// What was refused and why, in words.
    public var message: String {
        get { backing.message }
        set { backing.message = newValue }
    }
    /// The application or unit it concerned, when one is known.
    public var subject: LifeCycleSubject?
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

    private init(_ code: Code, _ message: String, subject: LifeCycleSubject?, file: String, line: Int) {
        backing = ErrorBacking(code, message, file: file, line: line)
        self.subject = subject
    }

    /// ``Code/illegalTransition``: `subject` cannot go from `from` to `to`; the message names
    /// the states it can go to.
    ///
    /// - Parameters:
    ///   - subject: the application or unit.
    ///   - from: its state.
    ///   - to: the state asked for.
    ///   - file: where it is thrown; the default is the caller's.
    ///   - line: where it is thrown; the default is the caller's.
    /// - Returns: the error.
    package static func illegalTransition(
        subject: LifeCycleSubject, from: LifeCycleState, to: LifeCycleState,
        file: String = #fileID, line: Int = #line
    ) -> Self {
        let legal = LifeCycleTransition.all.filter { $0.from == from }.map { "\($0.to)" }
        return Self(
            .illegalTransition,
            "\(subject): illegal transition \(from) → \(to); from \(from) the legal ones go to \(legal.isEmpty ? "nothing" : legal.joined(separator: ", "))",
            subject: subject, file: file, line: line)
    }

    /// ``Code/stateNotSaved``: the unit's `didEnterBackground` handler has not completed.
    ///
    /// - Parameters:
    ///   - unit: the unit asked to suspend.
    ///   - file: where it is thrown; the default is the caller's.
    ///   - line: where it is thrown; the default is the caller's.
    /// - Returns: the error.
    package static func stateNotSaved(unit: LifeCycleUnit.ID, file: String = #fileID, line: Int = #line) -> Self {
        Self(
            .stateNotSaved, "unit \(unit): cannot be suspended before its didEnterBackground handler has completed (its state is not saved)",
            subject: .unit(unit), file: file, line: line)
    }

    /// ``Code/backgroundTasksRunning``: the unit has background tasks running.
    ///
    /// - Parameters:
    ///   - unit: the unit asked to suspend.
    ///   - count: how many tasks run.
    ///   - file: where it is thrown; the default is the caller's.
    ///   - line: where it is thrown; the default is the caller's.
    /// - Returns: the error.
    package static func backgroundTasksRunning(unit: LifeCycleUnit.ID, count: Int, file: String = #fileID, line: Int = #line) -> Self {
        Self(
            .backgroundTasksRunning, "unit \(unit): cannot be suspended while \(count) background task\(count == 1 ? "" : "s") run",
            subject: .unit(unit), file: file, line: line)
    }

    /// ``Code/launchFailed``: the launch was abandoned.
    ///
    /// - Parameters:
    ///   - subject: the application or unit.
    ///   - reason: why, such as what `willFinishLaunching` threw.
    ///   - file: where it is thrown; the default is the caller's.
    ///   - line: where it is thrown; the default is the caller's.
    /// - Returns: the error.
    package static func launchFailed(subject: LifeCycleSubject, reason: String, file: String = #fileID, line: Int = #line) -> Self {
        Self(.launchFailed, "\(subject): launch failed in willFinishLaunching: \(reason)", subject: subject, file: file, line: line)
    }

    /// ``Code/applicationTerminated``: the application takes no more requests.
    ///
    /// - Parameters:
    ///   - file: where it is thrown; the default is the caller's.
    ///   - line: where it is thrown; the default is the caller's.
    /// - Returns: the error.
    package static func applicationTerminated(file: String = #fileID, line: Int = #line) -> Self {
        Self(.applicationTerminated, "the application has terminated", subject: .application, file: file, line: line)
    }

    /// ``Code/reentrantTransition``: a callback asked for a transition of its own subject.
    ///
    /// - Parameters:
    ///   - subject: the application or unit.
    ///   - file: where it is thrown; the default is the caller's.
    ///   - line: where it is thrown; the default is the caller's.
    /// - Returns: the error.
    package static func reentrantTransition(subject: LifeCycleSubject, file: String = #fileID, line: Int = #line) -> Self {
        Self(
            .reentrantTransition, "\(subject): a callback asked for a transition of its own subject; it would wait for itself",
            subject: subject, file: file, line: line)
    }

    /// ``Code/unknownUnit``: no unit has the identifier.
    ///
    /// - Parameters:
    ///   - id: the identifier asked for.
    ///   - file: where it is thrown; the default is the caller's.
    ///   - line: where it is thrown; the default is the caller's.
    /// - Returns: the error.
    package static func unknownUnit(_ id: LifeCycleUnit.ID, file: String = #fileID, line: Int = #line) -> Self {
        Self(.unknownUnit, "no unit \(id)", subject: .unit(id), file: file, line: line)
    }

    /// The message.
    public var description: String { backing.description }

    /// The message, the code and where it was thrown.
    public var debugDescription: String { backing.debugDescription }

    public static func == (lhs: LifeCycleError, rhs: LifeCycleError) -> Bool {
        lhs.backing == rhs.backing && lhs.subject == rhs.subject
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(backing)
        hasher.combine(subject)
    }
}

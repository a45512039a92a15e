/// Why a life-cycle request was refused.
public enum LifeCycleError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The transition is not one of ``LifeCycleTransition/all``.
    case illegalTransition(subject: LifeCycleSubject, from: LifeCycleState, to: LifeCycleState)
    /// A unit may be suspended only once its `didEnterBackground` handler has completed:
    /// otherwise terminating it could lose what it had not saved.
    case stateNotSaved(unit: LifeCycleUnit.ID)
    /// A unit may be suspended only while no background task runs.
    case backgroundTasksRunning(unit: LifeCycleUnit.ID, count: Int)
    /// `willFinishLaunching` threw: the launch was abandoned and the subject is not running.
    case launchFailed(subject: LifeCycleSubject, reason: String)
    /// The application has terminated; it takes no more requests.
    case applicationTerminated
    /// A callback (or a task it started, which inherits its context) asked for a transition of
    /// its own subject, which would wait for the callback to return: a deadlock, refused. To
    /// move the subject on from a callback, use `Task.detached`.
    case reentrantTransition(subject: LifeCycleSubject)
    /// No unit has this identifier.
    case unknownUnit(LifeCycleUnit.ID)

    public var description: String {
        switch self {
        case .illegalTransition(let subject, let from, let to):
            let legal = LifeCycleTransition.all.filter { $0.from == from }.map { "\($0.to)" }
            return "\(subject): illegal transition \(from) → \(to); from \(from) the legal ones go to \(legal.isEmpty ? "nothing" : legal.joined(separator: ", "))"
        case .stateNotSaved(let unit):
            return "unit \(unit): cannot be suspended before its didEnterBackground handler has completed (its state is not saved)"
        case .backgroundTasksRunning(let unit, let count):
            return "unit \(unit): cannot be suspended while \(count) background task\(count == 1 ? "" : "s") run"
        case .launchFailed(let subject, let reason):
            return "\(subject): launch failed in willFinishLaunching: \(reason)"
        case .applicationTerminated:
            return "the application has terminated"
        case .reentrantTransition(let subject):
            return "\(subject): a callback asked for a transition of its own subject; it would wait for itself"
        case .unknownUnit(let id):
            return "no unit \(id)"
        }
    }
}

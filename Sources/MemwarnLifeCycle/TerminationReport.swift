/// What ``LifeCycleApplication/terminate()`` did, subject by subject.
public struct TerminationReport: Sendable, CustomStringConvertible {
    /// One subject's part.
    public enum Outcome: Sendable, Hashable, CustomStringConvertible {
        /// `willTerminate` ran to its end (or threw: see ``HandlerOutcome``).
        case told(HandlerOutcome)
        /// Suspended: not told (it runs no code, and its state was saved before it was suspended).
        case suspendedNotTold
        /// Not running: nothing to do.
        case notRunning
        /// The transition was refused.
        case refused(String)

        public var description: String {
            switch self {
            case .told(let outcome): "willTerminate \(outcome)"
            case .suspendedNotTold: "suspended, not told"
            case .notRunning: "not running"
            case .refused(let reason): "refused: \(reason)"
            }
        }
    }

    /// The units, by identifier.
    public var units: [LifeCycleUnit.ID: Outcome]
    /// The application's own `willTerminate`.
    public var application: Outcome
    /// From the request to the end.
    public var duration: Duration

    /// The subjects whose `willTerminate` overran its deadline and was cut off.
    public var overran: [LifeCycleSubject] {
        var subjects = units.filter { if case .told(.overran) = $0.value { true } else { false } }.keys.sorted().map { LifeCycleSubject.unit($0) }
        if case .told(.overran) = application { subjects.append(.application) }
        return subjects
    }

    public var description: String {
        (units.sorted { $0.key < $1.key }.map { "unit \($0.key): \($0.value)" } + ["application: \(application)"]).joined(separator: "\n")
    }
}

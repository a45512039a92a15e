/// Whose life cycle: the process's ``LifeCycleApplication`` or one of its units.
public enum LifeCycleSubject: Sendable, Hashable, CustomStringConvertible {
    /// The process's ``LifeCycleApplication``.
    case application
    /// The ``LifeCycleUnit`` with this identifier.
    case unit(LifeCycleUnit.ID)

    public var description: String {
        switch self {
        case .application: "application"
        case .unit(let id): "unit \(id)"
        }
    }
}

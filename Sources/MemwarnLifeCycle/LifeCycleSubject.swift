/// Whose life cycle: the process's ``Application`` or one of its units.
public enum LifeCycleSubject: Sendable, Hashable, CustomStringConvertible {
    case application
    case unit(LifeCycleUnit.ID)

    public var description: String {
        switch self {
        case .application: "application"
        case .unit(let id): "unit \(id)"
        }
    }
}

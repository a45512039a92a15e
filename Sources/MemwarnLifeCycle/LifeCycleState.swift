/// Where a ``LifeCycleApplication`` or a ``LifeCycleUnit`` is in its life cycle: the five states Apple
/// documents for apps and scenes.
public enum LifeCycleState: String, Sendable, CaseIterable, CustomStringConvertible {
    /// Not launched yet, or terminated (by request, or discarded while suspended).
    case notRunning = "not-running"
    /// In the foreground but not taking work: a short stop between other states.
    case inactive
    /// In the foreground, taking work.
    case active
    /// Running, out of the foreground: saving state, finishing background tasks.
    case background
    /// In memory but running no code: terminable without notice at `.critical` pressure.
    case suspended

    /// Inactive, active or background: running code, so told of termination (`willTerminate`).
    public var isRunning: Bool { self == .inactive || self == .active || self == .background }

    public var description: String { rawValue }
}

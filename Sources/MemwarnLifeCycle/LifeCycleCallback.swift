/// The callbacks of a life cycle, named as in `UIApplicationDelegate`.
public enum LifeCycleCallback: String, Sendable, CaseIterable, CustomStringConvertible {
    case willFinishLaunching
    case didFinishLaunching
    case willResignActive
    case didEnterBackground
    case willEnterForeground
    case didBecomeActive
    case willTerminate

    /// Whether it runs in the state being left (`will…`) rather than the state entered (`did…`).
    /// `willFinishLaunching` runs while still ``LifeCycleState/notRunning``.
    public var runsBeforeTheStateChanges: Bool {
        switch self {
        case .willFinishLaunching, .willResignActive, .willEnterForeground, .willTerminate: true
        case .didFinishLaunching, .didEnterBackground, .didBecomeActive: false
        }
    }

    public var description: String { rawValue }
}

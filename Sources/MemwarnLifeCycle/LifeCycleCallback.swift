/// The callbacks of a life cycle, named as in `UIApplicationDelegate`.
public enum LifeCycleCallback: String, Sendable, CaseIterable, CustomStringConvertible {
    /// ``LifeCycleDelegate/willFinishLaunching(_:restoring:)``: the launch has begun.
    case willFinishLaunching
    /// ``LifeCycleDelegate/didFinishLaunching(_:)``: the launch is done.
    case didFinishLaunching
    /// ``LifeCycleDelegate/willResignActive(_:)``: about to leave the active state.
    case willResignActive
    /// ``LifeCycleDelegate/didEnterBackground(_:)``: now in the background; save here.
    case didEnterBackground
    /// ``LifeCycleDelegate/willEnterForeground(_:)``: about to leave the background.
    case willEnterForeground
    /// ``LifeCycleDelegate/didBecomeActive(_:)``: now active.
    case didBecomeActive
    /// ``LifeCycleDelegate/willTerminate(_:)``: about to stop running.
    case willTerminate
    /// Not part of any transition: delivered on a memory warning (see
    /// ``LifeCycleApplication/attach(to:)``), to subjects that run code.
    case didReceiveMemoryWarning

    /// Whether it runs in the state being left rather than the state entered. The launch
    /// callbacks run in the state launched into — inactive or background — as UIKit's do (the
    /// seeds: "if fore, this property contains `UIApplicationStateInactive`; if back,
    /// `UIApplicationStateBackground`"), so a delegate can tell the two launches apart.
    package var runsBeforeTheStateChanges: Bool {
        switch self {
        case .willResignActive, .willEnterForeground, .willTerminate: true
        case .willFinishLaunching, .didFinishLaunching, .didEnterBackground, .didBecomeActive, .didReceiveMemoryWarning: false
        }
    }

    public var description: String { rawValue }
}

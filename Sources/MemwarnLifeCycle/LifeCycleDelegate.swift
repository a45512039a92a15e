public import MemwarnRelease

/// Told of a ``LifeCycleApplication``'s or a ``LifeCycleUnit``'s life-cycle events, as `UIApplicationDelegate`
/// and `UISceneDelegate` are. Every method has an empty default.
///
/// Callbacks for one subject never overlap and arrive in the documented order (see
/// ``LifeCycleTransition``). A callback may not request a transition of its own subject (it
/// would wait for itself): that is refused with ``LifeCycleError/Code/reentrantTransition``.
public protocol LifeCycleDelegate<Subject>: AnyObject, Sendable {
    /// ``LifeCycleApplication`` or ``LifeCycleUnit``.
    associatedtype Subject: AnyObject & Sendable

    /// The launch has begun. The subject is already in the state it launches into —
    /// ``LifeCycleState/inactive`` for the foreground, ``LifeCycleState/background`` for the
    /// background — as UIKit's app is. A unit relaunched after it was discarded gets
    /// `restoring: true`: load the state saved in ``didEnterBackground(_:)`` here. Throwing
    /// abandons the launch (the subject goes back to not running).
    ///
    /// - Parameters:
    ///   - subject: the application or the unit.
    ///   - restoring: whether the subject ran before (a unit relaunched after it was
    ///     terminated): load its saved state.
    /// - Throws: anything, to abandon the launch; the request that launched it fails with
    ///   ``LifeCycleError/Code/launchFailed``.
    func willFinishLaunching(_ subject: Subject, restoring: Bool) async throws
    /// The launch is done (the subject is inactive, or in the background).
    ///
    /// - Parameter subject: the application or the unit.
    func didFinishLaunching(_ subject: Subject) async
    /// The subject is about to leave ``LifeCycleState/active``.
    ///
    /// - Parameter subject: the application or the unit.
    func willResignActive(_ subject: Subject) async
    /// The subject is now in the background — it left the foreground, was launched into the
    /// background, or was resumed from suspension to handle an event there — : save everything
    /// a relaunch would need, within the configuration's
    /// ``LifeCycleConfiguration/backgroundHandlerDeadline``. A unit can be suspended (and then
    /// terminated under pressure) only once this returns without throwing and within the
    /// deadline. A suspended unit resumed on its way to the foreground is not told (it gets
    /// ``willEnterForeground(_:)``).
    ///
    /// - Parameter subject: the application or the unit.
    /// - Throws: anything, when the state could not be saved: the unit stays in the
    ///   background, unsaved, and is not suspended (a ``LifeCycleNotification/Event/handler(_:_:)``
    ///   notification reports it).
    func didEnterBackground(_ subject: Subject) async throws
    /// The subject is about to leave the background for the foreground.
    ///
    /// - Parameter subject: the application or the unit.
    func willEnterForeground(_ subject: Subject) async
    /// The subject is now ``LifeCycleState/active``.
    ///
    /// - Parameter subject: the application or the unit.
    func didBecomeActive(_ subject: Subject) async
    /// The subject is about to stop running, within the configuration's
    /// ``LifeCycleConfiguration/terminationDeadline``. Suspended units are not told.
    ///
    /// - Parameter subject: the application or the unit.
    func willTerminate(_ subject: Subject) async
    /// Memory is tight (`level` is `.warning` or `.critical`): drop what can be rebuilt —
    /// UIKit's `applicationDidReceiveMemoryWarning(_:)`. The application's delegate hears it
    /// first, then the delegates of the units that run code (inactive, active, background);
    /// suspended and not-running ones are not told. It comes before memwarn's own release of
    /// the same warning, all of it within one budget,
    /// ``LifeCycleConfiguration/memoryWarningDeadline`` (the application's delegate has at most
    /// half while units run); the release then reads usage afresh: what is dropped here counts
    /// toward the release's target. A handler still running when the budget is spent is cut off
    /// (cancelled, reported) and not awaited by the release, but this delegate's next callback
    /// waits for it. See ``LifeCycleApplication/didReceiveMemoryWarning(level:)``.
    ///
    /// - Parameters:
    ///   - subject: the application or the unit.
    ///   - level: the level that raised the warning, `.warning` or `.critical`.
    func didReceiveMemoryWarning(_ subject: Subject, level: MemoryPressureLevel) async
}

extension LifeCycleDelegate {
    public func willFinishLaunching(_ subject: Subject, restoring: Bool) async throws {}
    public func didFinishLaunching(_ subject: Subject) async {}
    public func willResignActive(_ subject: Subject) async {}
    public func didEnterBackground(_ subject: Subject) async throws {}
    public func willEnterForeground(_ subject: Subject) async {}
    public func didBecomeActive(_ subject: Subject) async {}
    public func willTerminate(_ subject: Subject) async {}
    public func didReceiveMemoryWarning(_ subject: Subject, level: MemoryPressureLevel) async {}
}

extension LifeCycleDelegate {
    /// Calls the delegate method for a callback.
    func deliver(
        _ callback: LifeCycleCallback, to subject: Subject, restoring: Bool = false,
        level: MemoryPressureLevel = .warning
    ) async throws {
        switch callback {
        case .willFinishLaunching: try await willFinishLaunching(subject, restoring: restoring)
        case .didFinishLaunching: await didFinishLaunching(subject)
        case .willResignActive: await willResignActive(subject)
        case .didEnterBackground: try await didEnterBackground(subject)
        case .willEnterForeground: await willEnterForeground(subject)
        case .didBecomeActive: await didBecomeActive(subject)
        case .willTerminate: await willTerminate(subject)
        case .didReceiveMemoryWarning: await didReceiveMemoryWarning(subject, level: level)
        }
    }
}

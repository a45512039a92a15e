/// Told of each memory warning before the release it starts, as UIKit tells an app delegate
/// (`applicationDidReceiveMemoryWarning(_:)`) before the system reclaims anything.
///
/// Register one with ``ReleaseCoordinator/addWarningResponder(_:)``. When the coordinator's
/// monitor rises to `.warning` or `.critical` (see `ReleaseCoordinator.attach(to:)`), or a
/// `warn` request reaches the control endpoint, each responder is told first, in the order
/// registered, in a detached task of its own, while the thread that releases (the monitor's
/// release thread, `memwarn-release`, or the control endpoint's) waits for it at most
/// ``memoryWarningDeadline`` (and as long again, 50 ms at least, for it to return once its
/// deadline passed: a grace for scheduling, not a budget), then reads usage afresh, so what a
/// responder dropped counts toward the release's target. A responder should keep its deadline
/// itself: return by then, leaving what still runs detached. `MemwarnLifeCycle`'s
/// `LifeCycleApplication` is one: it passes the warning on to its delegate and its running
/// units' delegates.
public protocol MemoryWarningResponder: AnyObject, Sendable {
    /// How long a release waits for ``didReceiveMemoryWarning(level:)`` to return before it
    /// goes on without it (the responder is not cancelled; what it frees later still helps).
    var memoryWarningDeadline: Duration { get }

    /// Drop what can be rebuilt. Runs in a detached task, before the release, while the
    /// releasing thread (the monitor's release thread, `memwarn-release`, or the control
    /// endpoint's) waits for it; never on the thread that reads the kernel's events.
    ///
    /// - Parameter level: the level that raised the warning, `.warning` or `.critical`.
    func didReceiveMemoryWarning(level: MemoryPressureLevel) async
}

/// What telling the responders of one memory warning did.
package struct MemoryWarningDelivery: Sendable, Hashable {
    /// The responders told.
    package var responders: Int
    /// The responders still running when the release stopped waiting for them.
    package var overran: Int
    /// How long the release waited.
    package var duration: Duration
}

import Dispatch

/// libdispatch makes a `timerfd` for each clock the first time a timer on that clock is armed —
/// Swift's suspending clock, its continuous clock (`Task.sleep(for:)`), the wall clock — and
/// traps (SIGILL) when it cannot make one. In a run whose descriptors are running out (a small
/// `ulimit -n`, a connection flood) the first timer on a clock, armed late, would take `memwarn`
/// or the demo down where the code that ran out should have said so. So their entry points arm
/// one timer on each first, while descriptors are free: three descriptors, held for the
/// process's life, as they would be anyway.
package enum DispatchTimers {
    /// Arms and waits for one timer on each clock (about a millisecond each).
    package static func prepare() async {
        // A deadline that has already passed is run at once, with no timer: 1 ms is not.
        try? await SuspendingClock().sleep(for: .milliseconds(1))
        try? await ContinuousClock().sleep(for: .milliseconds(1))
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            DispatchQueue.global().asyncAfter(wallDeadline: .now() + .milliseconds(1)) { done.resume() }
        }
    }
}

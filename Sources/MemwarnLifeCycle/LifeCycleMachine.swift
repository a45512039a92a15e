import MemwarnRelease
import MemwarnSystem

/// The state of one ``LifeCycleApplication`` or ``LifeCycleUnit`` and the running of its transitions: one at a
/// time, in the order asked, each checked against ``LifeCycleTransition/all`` and delivering
/// its callbacks in order.
final class LifeCycleMachine: Sendable {
    /// What the owner does at a transition's steps.
    struct Hooks: Sendable {
        /// Refuses a legal transition for the owner's own reasons (a unit: not saved).
        var check: @Sendable (LifeCycleTransition) throws -> Void = { _ in }
        /// Delivers a callback to the delegate (with a deadline where one applies).
        var deliver: @Sendable (LifeCycleCallback, _ restoring: Bool) async -> HandlerOutcome
        /// Runs under the state lock as the state changes (a unit: join or leave the tiers).
        var stateWillChange: @Sendable (LifeCycleTransition) -> Void = { _ in }
        /// Runs after the transition's last callback.
        var transitionDidFinish: @Sendable (LifeCycleTransition, [LifeCycleCallback: HandlerOutcome]) async -> Void = { _, _ in }
    }

    private struct State {
        var current = LifeCycleState.notRunning
        /// Operations running now (a discard must not race one: it may be resuming the unit).
        var operations = 0
        /// Operations queued or running.
        var queued = 0
        /// The last queued operation: the next one waits for it.
        var tail: Task<Void, Never>?
        /// A delegate callback cut off at its deadline that has not returned yet: the next
        /// callback to the same delegate waits for it.
        var lateHandler: Task<Void, Never>?
    }

    /// The transition running on this task, if any: refuses re-entry from a callback.
    @TaskLocal private static var running: ObjectIdentifier?

    let subject: LifeCycleSubject
    private let broadcaster: Broadcaster<LifeCycleNotification>
    private let state = Locked(State())

    init(subject: LifeCycleSubject, broadcaster: Broadcaster<LifeCycleNotification>) {
        self.subject = subject
        self.broadcaster = broadcaster
    }

    var current: LifeCycleState { state.withLock { $0.current } }

    /// Whether an operation is queued or running: one queued now waits for it.
    var isBusy: Bool { state.withLock { $0.queued > 0 } }

    /// Runs `body` with the current state, which cannot change until it returns.
    func whileInState<T>(_ body: (LifeCycleState) throws -> T) rethrows -> T {
        try state.withLock { try body($0.current) }
    }

    func post(_ event: LifeCycleNotification.Event) {
        broadcaster.post(LifeCycleNotification(subject: subject, event: event))
    }

    /// Runs `operation` after every operation queued before it, and before any queued after.
    @discardableResult
    func serially<T: Sendable>(_ operation: @escaping @Sendable () async throws -> T) async throws -> T {
        guard Self.running != ObjectIdentifier(self) else { throw LifeCycleError.reentrantTransition(subject: subject) }
        let task = state.withLock { state in
            let previous = state.tail
            state.queued += 1
            let task = Task { [self] in
                await previous?.value
                self.state.withLock { $0.operations += 1 }
                defer {
                    self.state.withLock {
                        $0.operations -= 1
                        $0.queued -= 1
                    }
                }
                return try await Self.$running.withValue(ObjectIdentifier(self)) { try await operation() }
            }
            state.tail = Task { _ = try? await task.value }
            return task
        }
        return try await task.value
    }

    /// Performs one legal transition to `target` (call inside ``serially(_:)``), as one step
    /// on the way to `destination` (by default `target` itself; see
    /// ``LifeCycleTransition/callbacks(onTheWayTo:)``).
    ///
    /// Each callback's notification is posted once its delegate method has returned, as UIKit
    /// posts `UIApplicationDidBecomeActiveNotification` after `applicationDidBecomeActive(_:)`.
    ///
    /// - Throws: ``LifeCycleError/Code/illegalTransition``, the owner's check,
    ///   or ``LifeCycleError/Code/launchFailed`` (the state then goes back to not
    ///   running).
    @discardableResult
    func perform(
        to target: LifeCycleState, restoring: Bool = false, onTheWayTo destination: LifeCycleState? = nil,
        hooks: Hooks
    ) async throws -> [LifeCycleCallback: HandlerOutcome] {
        let transition = try legalTransition(to: target, hooks: hooks)
        let callbacks = transition.callbacks(onTheWayTo: destination ?? target)

        var outcomes: [LifeCycleCallback: HandlerOutcome] = [:]
        for callback in callbacks where callback.runsBeforeTheStateChanges {
            outcomes[callback] = await deliver(callback, restoring: restoring, hooks: hooks)
        }
        try state.withLock { state in
            try hooks.check(transition)  // again: callbacks ran since, and e.g. a background task may have begun
            hooks.stateWillChange(transition)
            state.current = transition.to
            // A new launch gets a new delegate: it does not wait for the old one's late callback.
            if transition.to == .notRunning { state.lateHandler = nil }
        }
        post(.stateChanged(from: transition.from, to: transition.to))
        for callback in callbacks where !callback.runsBeforeTheStateChanges {
            let outcome = await deliver(callback, restoring: restoring, hooks: hooks)
            outcomes[callback] = outcome
            if callback == .willFinishLaunching, outcome != .completed {
                abandonLaunch(transition)
                throw LifeCycleError.launchFailed(subject: subject, reason: outcome.description)
            }
        }
        await hooks.transitionDidFinish(transition, outcomes)
        return outcomes
    }

    /// The legal transition from the current state to `target`, which the owner accepts.
    ///
    /// - Throws: ``LifeCycleError/Code/illegalTransition`` or the owner's check.
    func legalTransition(to target: LifeCycleState, hooks: Hooks) throws -> LifeCycleTransition {
        try state.withLock { state in
            guard let transition = LifeCycleTransition.between(state.current, target) else {
                throw LifeCycleError.illegalTransition(subject: subject, from: state.current, to: target)
            }
            try hooks.check(transition)
            return transition
        }
    }

    /// `willFinishLaunching` failed: back to not running (the owner drops what the launch made).
    private func abandonLaunch(_ transition: LifeCycleTransition) {
        state.withLock { $0.current = .notRunning }
        post(.stateChanged(from: transition.to, to: .notRunning))
    }

    private func deliver(_ callback: LifeCycleCallback, restoring: Bool, hooks: Hooks) async -> HandlerOutcome {
        let outcome = await hooks.deliver(callback, restoring)
        post(.callback(callback))
        if outcome != .completed { post(.handler(callback, outcome)) }
        return outcome
    }

    /// Runs one of the delegate's callbacks, `handler`, after the delegate's previous one: a
    /// callback cut off at its deadline goes on running detached (the caller — a release, a
    /// transition — does not wait for it), but the delegate's own callbacks stay serial, so the
    /// next one waits for it — within its own deadline (one without a deadline waits at most
    /// ``lateHandlerWait``). A callback that cannot start before then (the previous one still
    /// runs, or no time was left) is still delivered, never dropped: queued behind the previous
    /// one, detached, and reported as cut off.
    ///
    /// - Parameter deadline: how long the callback may take, its wait for the previous one
    ///   included; `nil` for none.
    func runDelegateCallback(deadline: Duration?, _ handler: @escaping @Sendable () async throws -> Void) async -> HandlerOutcome {
        let start = ContinuousClock.now
        if let late = state.withLock({ $0.lateHandler }) {
            // A callback without a deadline of its own waits at most `lateHandlerWait`: a cut-off
            // handler that never returns must not hold the subject's queue for good.
            let wait = deadline ?? Self.lateHandlerWait
            let (outcome, _) = await runHandler(deadline: wait) { await late.value }
            guard outcome == .completed else { return deliverLate(after: late, deadline: wait, handler) }
            state.withLock { state in
                if state.lateHandler == late { state.lateHandler = nil }
            }
        }
        let remaining = deadline.map { $0 - (.now - start) }
        if let deadline, let remaining, remaining <= .zero { return deliverLate(after: nil, deadline: deadline, handler) }
        let (outcome, work) = await runHandler(deadline: remaining, handler)
        guard case .overran = outcome else { return outcome }
        state.withLock { $0.lateHandler = work }
        return .overran(deadline: deadline ?? .zero)
    }

    /// How long a callback without a deadline (`willEnterForeground`, `didBecomeActive`, …) waits
    /// for the delegate's cut-off previous callback before it is delivered after it, detached.
    static let lateHandlerWait = Duration.seconds(5)

    /// Delivers `handler` detached, after `previous` (the delegate's callback still running):
    /// it becomes the callback the next one waits for.
    private func deliverLate(
        after previous: Task<Void, Never>?, deadline: Duration,
        _ handler: @escaping @Sendable () async throws -> Void
    ) -> HandlerOutcome {
        state.withLock { state in
            state.lateHandler = Task {
                await previous?.value
                try? await handler()
            }
        }
        return .overran(deadline: deadline)
    }

    /// Moves a suspended, idle subject to not running at once (no callbacks: it runs no code).
    ///
    /// - Returns: whether it did; `false` when the subject is not suspended or an operation
    ///   is under way (it may be resuming the subject, which was asked for).
    func discardIfSuspended(_ stateWillChange: () -> Void) -> Bool {
        state.withLock { state in
            guard state.current == .suspended, state.operations == 0 else { return false }
            stateWillChange()
            state.current = .notRunning
            state.lateHandler = nil
            return true
        }
    }
}

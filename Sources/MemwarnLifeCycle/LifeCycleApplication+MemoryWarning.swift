public import MemwarnMonitor
public import MemwarnRelease
import MemwarnSystem

extension LifeCycleApplication: MemoryWarningResponder {
    /// Attaches the application to a monitor: its coordinator releases on the monitor's
    /// warnings (Memwarn's `ReleaseCoordinator.attach(to:)`), and before each release the application
    /// passes the warning on to the delegates (``LifeCycleDelegate/didReceiveMemoryWarning(_:level:)``)
    /// — one call, in place of attaching the coordinator yourself. A `warn` request to the
    /// control endpoint of the same coordinator (`memwarn trigger warn`) reaches them too.
    ///
    /// ```swift
    /// let app = LifeCycleApplication { unit in Session() }
    /// app.attach(to: monitor)
    /// ```
    ///
    /// - Parameter monitor: the monitor whose warnings the application and its coordinator
    ///   answer.
    /// - Returns: the observer token `ReleaseCoordinator.attach(to:)` returned for the
    ///   application's coordinator; the monitor's `removeObserver(_:)` with it detaches the
    ///   coordinator: the monitor's levels start no more releases or memory warnings.
    @discardableResult
    public func attach(to monitor: PressureMonitor) -> PressureMonitor.ObserverToken {
        coordinator.addWarningResponder(self)
        return coordinator.attach(to: monitor)
    }

    /// How long a release waits for the delegates: ``LifeCycleConfiguration/memoryWarningDeadline``,
    /// the one budget of the whole sequence (see ``didReceiveMemoryWarning(level:)``).
    public var memoryWarningDeadline: Duration { configuration.memoryWarningDeadline }

    /// Passes a memory warning on, as UIKit does, within one budget,
    /// ``LifeCycleConfiguration/memoryWarningDeadline``, counted from the warning: the
    /// application's delegate first (with at most half of it while units run, so that it cannot
    /// starve them); then every unit that runs code (inactive, active or background; all at once)
    /// with what is left; then the
    /// ``LifeCycleNotification/Event/memoryWarning(level:)`` notification; then it returns, and the
    /// release starts. Always in that order: a delegate still running when the budget is spent is
    /// cut off and reported (``LifeCycleNotification/Event/handler(_:_:)`` with
    /// ``HandlerOutcome/overran(deadline:)``, and a warning in the log), and the sequence goes
    /// on — the units are told, with no time left, before the release, which never waits for a
    /// late delegate. Each subject's callbacks stay serial: a delivery waits for its subject's
    /// transition under way, or its cut-off previous callback, and counts that wait in the
    /// budget (one that could not start in time is still delivered, after, and reported as cut
    /// off: never dropped). Suspended and not-running subjects are not told: they run no code.
    ///
    /// - Parameter level: the level that raised the warning, `.warning` or `.critical`.
    public func didReceiveMemoryWarning(level: MemoryPressureLevel) async {
        guard !registry(markingTerminated: false) else { return }
        let start = ContinuousClock.now
        let budget = configuration.memoryWarningDeadline
        let end = start + budget
        // The application's delegate may not starve the units: with units running, it has half.
        let share = units.contains { $0.machine.current.isRunning } ? budget / 2 : budget
        await deliverMemoryWarning(level, to: machine, until: start + share, reporting: share) { [self] in
            try await delegate?.deliver(.didReceiveMemoryWarning, to: self, level: level)
        }
        await withTaskGroup(of: Void.self) { group in
            for unit in units {
                group.addTask {
                    await self.deliverMemoryWarning(level, to: unit.machine, until: end, reporting: budget) {
                        try await unit.delegate?.deliver(.didReceiveMemoryWarning, to: unit, level: level)
                    }
                }
            }
        }
        machine.post(.memoryWarning(level: level))
    }

    /// Runs one subject's handler in its turn on the subject's serial queue, until `end`, and
    /// reports an overrun or a failure. Returns by `end` whatever the subject does.
    private func deliverMemoryWarning(
        _ level: MemoryPressureLevel, to machine: LifeCycleMachine, until end: ContinuousClock.Instant,
        reporting budget: Duration, _ handler: @escaping @Sendable () async throws -> Void
    ) async {
        let delivery: @Sendable () async throws -> HandlerOutcome = {
            try await machine.serially { () -> HandlerOutcome in
                guard machine.current.isRunning else { return .completed }  // suspended or not running: not told
                return await machine.runDelegateCallback(deadline: max(.zero, end - .now), handler)
            }
        }
        let reported: HandlerOutcome
        if machine.isBusy {
            // Behind a transition under way (a didEnterBackground of 5 s, say): waited for until
            // the budget ends, then it goes on without it — the delivery stays queued, and its
            // delegate is told late (with no time left: detached), after the release.
            let outcome = Locked<HandlerOutcome?>(nil)
            let (waited, _) = await runHandler(deadline: max(.zero, end - .now)) {
                let delivered = try await delivery()
                outcome.withLock { $0 = delivered }
            }
            switch (waited, outcome.withLock { $0 }) {
            case (.completed, .completed?), (.completed, nil): return
            case (.completed, .failed(let reason)?), (.failed(let reason), _): reported = .failed(reason: reason)
            case (.completed, .overran?), (.overran, _): reported = .overran(deadline: budget)
            }
        } else {
            // An idle queue starts it as soon as a thread is free; it then keeps the budget itself.
            do {
                switch try await delivery() {
                case .completed: return
                case .overran: reported = .overran(deadline: budget)
                case .failed(let reason): reported = .failed(reason: reason)
                }
            } catch {
                reported = .failed(reason: String(describing: error))  // its queue refused it (asked from its own callback)
            }
        }
        machine.post(.handler(.didReceiveMemoryWarning, reported))
        logger.warning(
            "didReceiveMemoryWarning did not complete",
            metadata: [
                "subject": "\(machine.subject)", "level": "\(level)", "outcome": "\(reported)",
            ])
    }
}

public import Memwarn

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
    /// - Returns: the coordinator's token; pass it to the monitor's `removeObserver(_:)` to
    ///   stop releasing for the monitor.
    @discardableResult
    public func attach(to monitor: PressureMonitor) -> PressureMonitor.ObserverToken {
        coordinator.addWarningResponder(self)
        return coordinator.attach(to: monitor)
    }

    /// How long a release waits for the delegates: ``LifeCycleConfiguration/memoryWarningDeadline``.
    public var memoryWarningDeadline: Duration { configuration.memoryWarningDeadline }

    /// Passes a memory warning on, as UIKit does: the application's delegate first, then every
    /// unit that runs code (inactive, active or background; all at once), each in its own
    /// serial order (never during one of its transitions) and cut off at
    /// ``LifeCycleConfiguration/memoryWarningDeadline``; then the ``LifeCycleNotification/Event/memoryWarning(level:)``
    /// notification. Suspended and not-running subjects are not told: they run no code.
    ///
    /// - Parameter level: the level that raised the warning, `.warning` or `.critical`.
    public func didReceiveMemoryWarning(level: MemoryPressureLevel) async {
        guard !registry(markingTerminated: false) else { return }
        _ = try? await machine.serially { [self] in
            guard machine.current.isRunning else { return }
            await deliverMemoryWarning(level, to: machine) { [self] in
                try await delegate?.deliver(.didReceiveMemoryWarning, to: self, level: level)
            }
        }
        await withTaskGroup(of: Void.self) { group in
            for unit in units {
                group.addTask {
                    _ = try? await unit.machine.serially {
                        guard unit.machine.current.isRunning, let delegate = unit.delegate else { return }
                        await self.deliverMemoryWarning(level, to: unit.machine) {
                            try await delegate.deliver(.didReceiveMemoryWarning, to: unit, level: level)
                        }
                    }
                }
            }
        }
        machine.post(.memoryWarning(level: level))
    }

    /// Runs one subject's handler under the deadline and reports an overrun or a failure.
    private func deliverMemoryWarning(_ level: MemoryPressureLevel, to machine: LifeCycleMachine,
                                      _ handler: @escaping @Sendable () async throws -> Void) async {
        let outcome = await runCallbackHandler(.didReceiveMemoryWarning, configuration: configuration, handler)
        if outcome != .completed {
            machine.post(.handler(.didReceiveMemoryWarning, outcome))
            logger.warning("didReceiveMemoryWarning did not complete", metadata: [
                "subject": "\(machine.subject)", "level": "\(level)", "outcome": "\(outcome)",
            ])
        }
    }
}

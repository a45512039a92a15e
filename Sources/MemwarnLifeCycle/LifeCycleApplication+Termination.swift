extension LifeCycleApplication {
    /// Terminates the process's life cycle, as iOS does before an app exits: every running
    /// unit (inactive, active or background) gets `willTerminate`, all at once, each cut off
    /// at ``LifeCycleConfiguration/terminationDeadline``; suspended units are not told (they
    /// saved before they were suspended); then the application's own `willTerminate`. The
    /// notification streams end. Calling it again does nothing more.
    ///
    /// - Returns: what each subject did.
    @discardableResult
    public func terminate() async -> TerminationReport {
        let start = ContinuousClock.now
        let wasTerminated = registry(markingTerminated: true)
        guard !wasTerminated else {
            return TerminationReport(units: [:], application: .notRunning, duration: .now - start)
        }
        let units = self.units
        var outcomes: [LifeCycleUnit.ID: TerminationReport.Outcome] = [:]
        await withTaskGroup(of: (LifeCycleUnit.ID, TerminationReport.Outcome).self) { group in
            for unit in units {
                group.addTask {
                    do {
                        let outcome: TerminationReport.Outcome = try await unit.machine.serially {
                            switch unit.machine.current {
                            case .suspended: return .suspendedNotTold
                            case .notRunning: return .notRunning
                            case .inactive, .active, .background:
                                let outcomes = try await unit.machine.perform(to: .notRunning, hooks: unit.hooks)
                                return .told(outcomes[.willTerminate] ?? .completed)
                            }
                        }
                        return (unit.id, outcome)
                    } catch {
                        return (unit.id, .refused(String(describing: error)))
                    }
                }
            }
            for await (id, outcome) in group { outcomes[id] = outcome }
        }
        let application: TerminationReport.Outcome
        do {
            application = try await machine.serially { [self] in
                guard machine.current.isRunning else { return machine.current == .suspended ? .suspendedNotTold : .notRunning }
                let outcomes = try await machine.perform(to: .notRunning, hooks: hooks)
                return .told(outcomes[.willTerminate] ?? .completed)
            }
        } catch {
            application = .refused(String(describing: error))
        }
        let report = TerminationReport(units: outcomes, application: application, duration: .now - start)
        for subject in report.overran { logger.error("willTerminate overran its deadline and was cut off", metadata: ["subject": "\(subject)"]) }
        broadcaster.finish()
        return report
    }
}

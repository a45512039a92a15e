import MemwarnSystem

extension LifeCycleUnit {
    /// Wakes the unit in the background if it does not run, holds a background task, and runs
    /// `event` (see ``LifeCycleApplication/deliverBackgroundEvent(to:name:_:)``).
    func handleBackgroundEvent<Result: Sendable>(
        name: String,
        _ event: @escaping @Sendable (LifeCycleUnit) async throws -> Result
    ) async throws -> Result {
        let work = Locked<Task<Result, any Error>?>(nil)
        let identifier = try await machine.serially { [self] in
            switch machine.current {
            case .notRunning, .suspended:
                // Launched (from the saved state, if it ran before) or resumed into the
                // background: didEnterBackground, with fresh background time.
                try await step(to: .background)
            case .background:
                restartBackgroundTime()
            case .inactive, .active:
                break
            }
            // Held before the serial order is let go: the suspension timer cannot come between.
            return beginBackgroundTask(name: name, checkingBackgroundTime: false) { work.withLock { $0 }?.cancel() }
        }
        let task = Task { [self] in try await event(self) }
        work.withLock { $0 = task }
        if backgroundTasks[identifier] == nil { task.cancel() }  // its time ran out before it started
        defer { endBackgroundTask(identifier, reportingMisuse: false) }  // then it may be suspended again
        return try await withTaskCancellationHandler {
            try await task.value
        } onCancel: {
            task.cancel()
        }
    }

    /// A background event gets its own background time, as iOS grants one.
    private func restartBackgroundTime() {
        storage.withLock { $0.backgroundTimeEnds = .now + configuration.backgroundTaskTime }
        scheduleBackgroundTimeExpiry()
    }
}

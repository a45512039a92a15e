extension LifeCycleUnit {
    /// Starts a background task: while one runs, the unit is not suspended. Give it a name
    /// for reports, and an expiration handler, which runs when the unit's background time
    /// (``LifeCycleConfiguration/backgroundTaskTime`` from entering the background) runs
    /// out, with the task still held: end it there (as Apple's sample does); one left running
    /// is ended for it when the handler returns.
    ///
    /// - Parameters:
    ///   - name: the task's name in notifications and the log; `task <n>` by default.
    ///   - expirationHandler: runs when the background time runs out while the task runs.
    /// - Returns: the task's identifier, or ``BackgroundTaskIdentifier/invalid`` when the unit
    ///   is not running or its background time is used up.
    public func beginBackgroundTask(name: String? = nil, expirationHandler: (@Sendable () -> Void)? = nil) -> BackgroundTaskIdentifier {
        beginBackgroundTask(name: name, checkingBackgroundTime: true, expirationHandler: expirationHandler)
    }

    /// Begins a task; with `checkingBackgroundTime: false` even when the background time is
    /// used up (a background event's task, begun right after its time was restarted).
    func beginBackgroundTask(
        name: String?, checkingBackgroundTime: Bool,
        expirationHandler: (@Sendable () -> Void)?
    ) -> BackgroundTaskIdentifier {
        let begun: (BackgroundTaskIdentifier, String)? = machine.whileInState { current in
            guard current.isRunning else { return nil }
            return storage.withLock { storage in
                if checkingBackgroundTime, current == .background, let ends = storage.backgroundTimeEnds, ends <= .now { return nil }
                storage.nextTaskNumber += 1
                let identifier = BackgroundTaskIdentifier(rawValue: storage.nextTaskNumber)
                let taskName = name ?? "task \(storage.nextTaskNumber)"
                storage.tasks[identifier] = BackgroundTask(name: taskName, expirationHandler: expirationHandler)
                return (identifier, taskName)
            }
        }
        guard let (identifier, taskName) = begun else {
            logger.debug("background task not begun", metadata: ["state": "\(state)"])
            return .invalid
        }
        machine.post(.backgroundTaskBegan(identifier, name: taskName))
        return identifier
    }

    /// Ends a background task. Ending an unknown or already-ended task is a misuse: it is
    /// reported (a ``LifeCycleNotification/Event/misuse(_:)`` notification and a warning in the
    /// log) and changes nothing.
    ///
    /// - Parameter identifier: what ``beginBackgroundTask(name:expirationHandler:)`` returned.
    /// - Returns: whether a running task was ended.
    @discardableResult
    public func endBackgroundTask(_ identifier: BackgroundTaskIdentifier) -> Bool {
        endBackgroundTask(identifier, reportingMisuse: true)
    }

    /// Ends a task; with `reportingMisuse: false` a task already ended (or expired) is no misuse.
    @discardableResult
    func endBackgroundTask(_ identifier: BackgroundTaskIdentifier, reportingMisuse: Bool) -> Bool {
        let (task, remaining) = storage.withLock { storage in (storage.tasks.removeValue(forKey: identifier), storage.tasks.count) }
        guard let task else {
            guard reportingMisuse else { return false }
            let message =
                identifier == .invalid
                ? "endBackgroundTask called with the invalid identifier"
                : "endBackgroundTask(\(identifier)): no such running task (unknown, already ended, or expired)"
            logger.warning("\(message)")
            machine.post(.misuse(message))
            return false
        }
        machine.post(.backgroundTaskEnded(identifier, name: task.name))
        if remaining == 0 && state == .background { scheduleSuspensionIfIdle() }
        return true
    }

    /// The running background tasks, by identifier, with their names.
    public var backgroundTasks: [BackgroundTaskIdentifier: String] {
        storage.withLock { $0.tasks.mapValues(\.name) }
    }

    /// The background time left: `nil` in the foreground (not limited), the time until the
    /// background tasks expire in the background, and zero when suspended or not running.
    public var backgroundTimeRemaining: Duration? {
        let current = state
        switch current {
        case .inactive, .active: return nil
        case .suspended, .notRunning: return .zero
        case .background:
            guard let ends = storage.withLock({ $0.backgroundTimeEnds }) else { return .zero }
            return max(.zero, ends - .now)
        }
    }

    /// Arms the timer that expires the background tasks when the background time runs out.
    func scheduleBackgroundTimeExpiry() {
        guard let ends = storage.withLock({ $0.backgroundTimeEnds }) else { return }
        let timer = Task.detached { [weak self] in  // detached: see scheduleSuspensionIfIdle()
            try? await Task.sleep(until: ends, clock: .continuous)
            guard !Task.isCancelled, let self else { return }
            expireBackgroundTasks()
        }
        storage.withLock { storage in
            storage.expiryTimer?.cancel()
            storage.expiryTimer = timer
        }
    }

    /// The background time ran out: runs each running task's expiration handler with the task
    /// still held — so a handler may end its own task, as Apple's sample does — and then ends,
    /// for it, a task the handler left running.
    func expireBackgroundTasks() {
        let expiring = storage.withLock { $0.tasks.sorted { $0.key.rawValue < $1.key.rawValue } }
        for (identifier, task) in expiring {
            machine.post(.backgroundTaskExpired(identifier, name: task.name))
            task.expirationHandler?()
            let leftRunning = storage.withLock { $0.tasks.removeValue(forKey: identifier) } != nil
            if leftRunning {
                logger.warning("a background task's expiration handler did not end it; ended for it", metadata: ["task": "\(task.name)"])
                machine.post(.backgroundTaskEnded(identifier, name: task.name))
            }
        }
        if state == .background { scheduleSuspensionIfIdle() }
    }
}

public import MemwarnRelease

extension LifeCycleUnit {
    /// Terminates the unit if it is suspended — no `willTerminate`: a suspended unit runs no
    /// code — releasing and unregistering its consumers and dropping its delegate. The
    /// coordinator calls this in tier `suspendedUnits` at `.critical`, largest unit first. A
    /// unit that is not suspended (it is being resumed) frees nothing.
    ///
    /// - Parameter request: the coordinator's request; only tier `suspendedUnits` frees anything.
    /// - Returns: the bytes its consumers freed.
    public func release(_ request: ReleaseRequest) -> Int {
        guard request.tier == .suspendedUnits else { return 0 }
        guard machine.discardIfSuspended({ coordinator.unregister(self) }) else { return 0 }
        let freed = relinquish()
        storage.withLock { $0.discardCount += 1 }
        machine.post(.stateChanged(from: .suspended, to: .notRunning))
        machine.post(.discarded(freedBytes: freed))
        logger.info("suspended unit terminated to free memory", metadata: ["freedBytes": "\(freed)"])
        return freed
    }
}

extension ResourcePool {
    /// Closes every idle handle, least recently used first, whatever the ``retention`` says:
    /// the hook for going to the background. Handles in use stay open (close them with a later
    /// call, once they are idle). With an asynchronous `close` the handles leave the pool at once
    /// and their closes are started, not awaited: their failures go to `onCloseError`, or are
    /// kept for ``takeCloseErrors()`` (``closeIdleAndWait()`` waits and returns them).
    ///
    /// - Returns: what was closed (or started closing) and what failed (failures also go to
    ///   `onCloseError`).
    /// - Complexity: O(n) in the idle handles, plus their synchronous `close`.
    @discardableResult
    public func closeIdle() -> ResourceCloseResult {
        let (taken, inUse) = takeAllIdle()
        let failures = close(taken, keepUnreported: false)
        return ResourceCloseResult(closed: taken.count, bytesFreed: taken.count * bytesPerHandle, inUse: inUse, failures: failures)
    }

    /// Closes every idle handle, whatever the ``retention`` says, awaiting each close (never
    /// blocking a thread on an asynchronous one), then waits for the closes started earlier by
    /// releases and ``closeIdle()`` to end: the call for a shutdown.
    ///
    /// - Returns: what this call closed and what failed (failures also go to `onCloseError`).
    public func closeIdleAndWait() async -> ResourceCloseResult {
        let (taken, inUse) = takeAllIdle()
        let failures = await closeAwaiting(taken)
        report(failures, keepUnreported: false)
        closesEnded(taken.count)
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = state.withLock { state in
                guard state.closing > 0 else { return true }
                state.closesAwaited.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
        return ResourceCloseResult(closed: taken.count, bytesFreed: taken.count * bytesPerHandle, inUse: inUse, failures: failures)
    }

    /// Takes every idle handle out to be closed; also says how many stay in use.
    private func takeAllIdle() -> (taken: [Handle], inUse: Int) {
        state.withLock { state in
            let taken = state.takeIdle(state.idle.count)
            return (taken, state.open - state.idle.count)
        }
    }

    /// Closes handles taken out of the pool: at once with a synchronous `close`, returning its
    /// failures (also given to `onCloseError`, or kept when `keepUnreported` and there is none);
    /// with an asynchronous one, in a task, its failures given to `onCloseError` or kept.
    func close(_ taken: [Handle], keepUnreported: Bool) -> [ResourceCloseError] {
        guard !taken.isEmpty else { return [] }
        guard let closeNow = driver.closeNow else {
            Task {
                report(await closeAwaiting(taken), keepUnreported: true)
                closesEnded(taken.count)
            }
            return []
        }
        var failures: [ResourceCloseError] = []
        for handle in taken {
            do { try closeNow(handle.resource) } catch { failures.append(ResourceCloseError(pool: name, error: error)) }
        }
        report(failures, keepUnreported: keepUnreported)
        closesEnded(taken.count)
        return failures
    }

    /// Closes handles one after another, awaiting each close; returns the failures.
    private func closeAwaiting(_ taken: [Handle]) async -> [ResourceCloseError] {
        var failures: [ResourceCloseError] = []
        for handle in taken {
            do { try await driver.close(handle.resource) } catch { failures.append(ResourceCloseError(pool: name, error: error)) }
        }
        return failures
    }

    private func report(_ failures: [ResourceCloseError], keepUnreported: Bool) {
        guard !failures.isEmpty else { return }
        if let onCloseError {
            for failure in failures { onCloseError(failure) }
        } else if keepUnreported {
            state.withLock { $0.unreportedCloseErrors.append(contentsOf: failures) }
        }
    }

    /// `count` closes ended: their places go to waiting borrowers.
    private func closesEnded(_ count: Int) {
        guard count > 0 else { return }
        let maximum = maximumCount
        let (grants, awaited) = state.withLock { $0.closed(count, maximum: maximum) }
        for (waiter, grant) in grants { waiter.continuation.resume(returning: grant) }
        for continuation in awaited { continuation.resume() }
    }
}

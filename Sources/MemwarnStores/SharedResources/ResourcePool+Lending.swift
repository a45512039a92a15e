extension ResourcePool {
    /// Lends a handle to `body`: an idle one (the most recently used), else a new one if
    /// fewer than ``maximumCount`` are open, else the first one returned (waiting in line).
    ///
    /// The handle goes back to the pool when `body` returns or throws; it is not closed
    /// while `body` runs.
    ///
    /// - Parameters:
    ///   - isolation: the caller's actor, on which `body` runs.
    ///   - body: uses the resource; it must not keep it.
    /// - Returns: what `body` returns.
    /// - Complexity: O(1) plus `open` when the pool opens a handle, plus O(w) in the waiters
    ///   when it has to wait.
    /// - Throws: what `open` or `body` throws; `CancellationError` when the task is
    ///   cancelled while waiting for a handle.
    public func withResource<T>(
        isolation: isolated (any Actor)? = #isolation,
        _ body: (Resource) async throws -> T
    ) async throws -> T {
        let handle = try await checkOut()
        let result: T
        do {
            result = try await body(handle.resource)
        } catch {
            checkIn(handle)
            throw error
        }
        checkIn(handle)
        return result
    }

    private func checkOut() async throws -> Handle {
        let maximum = maximumCount
        var grant = state.withLock { $0.take(maximum: maximum) }
        if grant == nil {
            let id = state.withLock { state in
                state.nextWaiterID += 1
                return state.nextWaiterID
            }
            grant = try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Grant, any Error>) in
                    let now: Result<Grant, any Error>? = state.withLock { state in
                        if Task.isCancelled { return .failure(CancellationError()) }
                        if let grant = state.take(maximum: maximum) { return .success(grant) }
                        state.waiters.append(Waiter(id: id, continuation: continuation))
                        return nil
                    }
                    if let now { continuation.resume(with: now) }
                }
            } onCancel: {
                let waiter = state.withLock { state in
                    state.waiters.firstIndex { $0.id == id }.map { state.waiters.remove(at: $0) }
                }
                waiter?.continuation.resume(throwing: CancellationError())
            }
        }
        switch grant! {
        case .handle(let handle):
            return handle
        case .open:
            let opened = clock.now
            state.withLock { $0.retention.opened(at: opened) }
            let handle: Handle
            do {
                handle = try Handle(await driver.open())
            } catch {
                // Pass the place on: someone waiting may open instead.
                let next = state.withLock { state -> Waiter? in
                    state.opening -= 1
                    guard !state.waiters.isEmpty else { return nil }
                    state.opening += 1
                    return state.waiters.removeFirst()
                }
                next?.continuation.resume(returning: .open)
                throw error
            }
            state.withLock { state in
                state.opening -= 1
                state.open += 1
            }
            return handle
        }
    }

    private func checkIn(_ handle: Handle) {
        let now = clock.now
        let next = state.withLock { state -> Waiter? in
            guard state.waiters.isEmpty else { return state.waiters.removeFirst() }
            state.idle.append(Idle(handle: handle, since: now))
            return nil
        }
        next?.continuation.resume(returning: .handle(handle))
    }
}

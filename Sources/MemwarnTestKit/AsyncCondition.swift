import MemwarnSystem

/// A value guarded by a lock that tasks await a condition on: `ConditionLock`'s counterpart for
/// tasks of Swift's pool, so that a test waits for what another task or thread does (a handler
/// began, every borrower is inside, a gate opened) instead of looking again after a sleep.
///
/// A waiter is resumed by the change that makes its condition true, at once; its bound is only
/// there so that a failure shows as a failure, not a hang.
package final class AsyncCondition<State: Sendable>: Sendable {
    private struct Waiter {
        /// Looks at the state; returns the waiter's resumption when its condition holds.
        var look: (inout State) -> (@Sendable () -> Void)?
        var bound: Task<Void, Never>?
    }

    private struct Guarded {
        var state: State
        var waiters: [Int: Waiter] = [:]
        var nextID = 0
    }

    private let guarded: Locked<Guarded>

    package init(_ state: State) { guarded = Locked(Guarded(state: state)) }

    /// Runs `body` with the state; then every waiter looks again, and those whose condition now
    /// holds are resumed.
    @discardableResult
    package func withLock<T: Sendable>(_ body: (inout State) -> T) -> T {
        let (result, ready) = guarded.withLock { inner -> (T, [@Sendable () -> Void]) in
            let result = body(&inner.state)
            var ready: [@Sendable () -> Void] = []
            for (id, waiter) in inner.waiters {
                guard let resume = waiter.look(&inner.state) else { continue }
                waiter.bound?.cancel()
                inner.waiters[id] = nil
                ready.append(resume)
            }
            return (result, ready)
        }
        for resume in ready { resume() }
        return result
    }

    /// Waits until `condition` finds what it looks for in the state, or until `limit` passes.
    /// Not ended by the task's cancellation: a handler that ignores cancellation waits here.
    ///
    /// - Parameters:
    ///   - limit: how long at most: a bound against a hang, not a measurement.
    ///   - condition: called with the lock held, at once and after every change; returns what
    ///     was waited for, or `nil` to go on waiting.
    /// - Returns: what `condition` found, or `nil` when `limit` passed first.
    package func wait<T: Sendable>(within limit: Duration, until condition: @escaping @Sendable (inout State) -> T?) async -> T? {
        await withCheckedContinuation { (continuation: CheckedContinuation<T?, Never>) in
            let found = guarded.withLock { inner -> T? in
                if let found = condition(&inner.state) { return found }
                inner.nextID += 1
                let id = inner.nextID
                let look: (inout State) -> (@Sendable () -> Void)? = { state in
                    guard let found = condition(&state) else { return nil }
                    return { continuation.resume(returning: found) }
                }
                inner.waiters[id] = Waiter(look: look, bound: bound(id, limit, continuation))
                return nil
            }
            if let found { continuation.resume(returning: found) }
        }
    }

    /// Waits until `condition` holds, or until `limit` passes.
    ///
    /// - Returns: whether it held within `limit`.
    @discardableResult
    package func wait(within limit: Duration, until condition: @escaping @Sendable (State) -> Bool) async -> Bool {
        await wait(within: limit) { (state: inout State) in condition(state) ? true : nil } ?? false
    }

    /// Resumes waiter `id` with `nil` once `limit` has passed, unless it was resumed before
    /// (then the bound is cancelled).
    private func bound<T: Sendable>(_ id: Int, _ limit: Duration, _ continuation: CheckedContinuation<T?, Never>) -> Task<Void, Never> {
        Task { [guarded] in
            guard (try? await Task.sleep(for: limit)) != nil else { return }  // cancelled: the condition held
            if guarded.withLock({ $0.waiters.removeValue(forKey: id) }) != nil { continuation.resume(returning: nil) }
        }
    }
}

extension AsyncCondition where State == Bool {
    /// A gate, closed: ``open()`` lets every waiter through, those to come included.
    package convenience init() { self.init(false) }

    /// Opens the gate.
    package func open() { withLock { $0 = true } }

    /// Waits until the gate is open, at most `limit`.
    ///
    /// - Returns: whether it opened within `limit`.
    @discardableResult
    package func wait(within limit: Duration) async -> Bool {
        await wait(within: limit) { $0 }
    }
}

/// Waits until the current task is cancelled, at most `limit`: a handler that takes as long as
/// it is let, for a test of the deadline that cuts it off.
///
/// - Throws: `CancellationError` when the task was cancelled; returns when `limit` passed first.
package func waitForCancellation(within limit: Duration) async throws {
    let cancelled = AsyncCondition<Bool>()
    await withTaskCancellationHandler {
        _ = await cancelled.wait(within: limit)
    } onCancel: {
        cancelled.open()
    }
    try Task.checkCancellation()
}

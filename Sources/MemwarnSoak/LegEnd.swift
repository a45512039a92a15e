import MemwarnSystem

/// A one-time event of a soak's run — the service ended, the load ended, the duration ran out,
/// the soak was interrupted — that several tasks wait for: the first reason fired is kept, and
/// every waiter gets it.
final class LegEnd<Reason: Sendable>: Sendable {
    private struct State {
        var reason: Reason?
        var waiters: [Int: CheckedContinuation<Reason?, Never>] = [:]
        var cancelled: Set<Int> = []
        var nextID = 0
    }

    private let state = Locked(State())

    init() {}

    /// The reason, once fired.
    var reason: Reason? { state.withLock { $0.reason } }

    /// Fires the event; only the first reason counts.
    func fire(_ reason: Reason) {
        let waiters = state.withLock { state -> [CheckedContinuation<Reason?, Never>] in
            guard state.reason == nil else { return [] }
            state.reason = reason
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume(returning: reason) }
    }

    /// Waits for the event, for at most `timeout` (`nil`: as long as it takes).
    ///
    /// - Returns: the reason, or `nil` when the timeout passed first.
    func wait(for timeout: Duration?) async -> Reason? {
        if let reason { return reason }
        return await withTaskGroup(of: Reason?.self) { group in
            group.addTask { await self.waitUntilFiredOrCancelled() }
            if let timeout {
                group.addTask {
                    try? await Task.sleep(for: timeout)
                    return nil
                }
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
    }

    private func waitUntilFiredOrCancelled() async -> Reason? {
        let id = state.withLock { state in
            defer { state.nextID += 1 }
            return state.nextID
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Reason?, Never>) in
                let immediate = state.withLock { state -> Reason?? in
                    if let reason = state.reason { return .some(reason) }
                    if state.cancelled.contains(id) { return .some(nil) }
                    state.waiters[id] = continuation
                    return nil
                }
                if let immediate { continuation.resume(returning: immediate) }
            }
        } onCancel: {
            let waiter = state.withLock { state in
                state.cancelled.insert(id)
                return state.waiters.removeValue(forKey: id)
            }
            waiter?.resume(returning: nil)
        }
    }
}

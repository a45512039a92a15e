import MemwarnSystem

/// An event that happens once and that several tasks wait for, each for at most a time of its
/// own — a soak's leg ending (the service ended, the load ended, the duration ran out, the soak
/// was interrupted), a child's exit: the first value fired is kept, and every waiter gets it.
final class OneTimeEvent<Value: Sendable>: Sendable {
    private struct State {
        var value: Value?
        var waiters: [Int: CheckedContinuation<Value?, Never>] = [:]
        var cancelled: Set<Int> = []
        var nextID = 0
    }

    private let state = Locked(State())

    init() {}

    /// The value, once fired.
    var value: Value? { state.withLock { $0.value } }

    /// Fires the event; only the first value counts.
    func fire(_ value: Value) {
        let waiters = state.withLock { state -> [CheckedContinuation<Value?, Never>] in
            guard state.value == nil else { return [] }
            state.value = value
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume(returning: value) }
    }

    /// Waits for the event, for at most `timeout` (`nil`: as long as it takes).
    ///
    /// - Returns: the value, or `nil` when the timeout passed first.
    func wait(for timeout: Duration?) async -> Value? {
        if let value { return value }
        return await withTaskGroup(of: Value?.self) { group in
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

    private func waitUntilFiredOrCancelled() async -> Value? {
        let id = state.withLock { state in
            defer { state.nextID += 1 }
            return state.nextID
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Value?, Never>) in
                let immediate = state.withLock { state -> Value?? in
                    if let value = state.value { return .some(value) }
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

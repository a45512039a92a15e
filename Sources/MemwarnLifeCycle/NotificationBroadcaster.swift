import Memwarn

/// Hands every ``LifeCycleNotification`` to each stream and observer, in the order posted.
final class NotificationBroadcaster: Sendable {
    private struct State {
        var streams: [Int: AsyncStream<LifeCycleNotification>.Continuation] = [:]
        var observers: [Int: @Sendable (LifeCycleNotification) -> Void] = [:]
        var nextID = 0
        var finished = false
    }

    private let state = Locked(State())

    /// A stream of every notification posted from now on, until ``finish()``.
    func stream() -> AsyncStream<LifeCycleNotification> {
        let (stream, continuation) = AsyncStream.makeStream(of: LifeCycleNotification.self)
        let id = state.withLock { state in
            state.nextID += 1
            if state.finished { continuation.finish() } else { state.streams[state.nextID] = continuation }
            return state.nextID
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.streams.removeValue(forKey: id) }
        }
        return stream
    }

    /// Calls `observer` with every notification, on the posting task: return quickly.
    func addObserver(_ observer: @escaping @Sendable (LifeCycleNotification) -> Void) -> Int {
        state.withLock { state in
            state.nextID += 1
            state.observers[state.nextID] = observer
            return state.nextID
        }
    }

    func removeObserver(_ id: Int) {
        _ = state.withLock { $0.observers.removeValue(forKey: id) }
    }

    func post(_ notification: LifeCycleNotification) {
        // Streams are fed under the lock, so every stream sees one order.
        let observers = state.withLock { state in
            for continuation in state.streams.values { continuation.yield(notification) }
            return Array(state.observers.values)
        }
        for observer in observers { observer(notification) }
    }

    /// Ends every stream (the application terminated).
    func finish() {
        let streams = state.withLock { state in
            state.finished = true
            defer { state.streams = [:] }
            return Array(state.streams.values)
        }
        for continuation in streams { continuation.finish() }
    }
}

import MemwarnSystem
import Synchronization

/// Hands every element posted to each of its streams and observers, in the order posted: the
/// one fan-out of the package (level events, exhaustion changes, release reports, life-cycle
/// notifications).
///
/// Streams are fed under the lock, so every stream sees one order; observers are called after
/// it, on the posting thread. Observer ids are unique across every broadcaster of the process,
/// so a token can be removed from whichever broadcaster holds it.
package final class Broadcaster<Element: Sendable>: Sendable {
    private struct State {
        var streams: [Int: AsyncStream<Element>.Continuation] = [:]
        var observers: [Int: @Sendable (Element) -> Void] = [:]
        var latest: Element?
        var finished = false
    }

    private let state = Locked(State())
    private let replaysLatest: Bool

    /// - Parameter replaysLatest: whether a new stream starts with the latest element posted.
    package init(replaysLatest: Bool = false) {
        self.replaysLatest = replaysLatest
    }

    /// A new id, unique in the process, for an observer (or anything an observer token names).
    package static func nextID() -> Int {
        _ids.wrappingAdd(1, ordering: .relaxed).newValue
    }

    /// The latest element posted (kept when `replaysLatest`), or `nil`.
    package var latest: Element? { state.withLock { $0.latest } }

    /// A stream of the elements posted from now on (the latest one first, when it replays it),
    /// until ``finish()``; a stream made after ``finish()`` ends at once, after the latest.
    package func stream() -> AsyncStream<Element> {
        let (stream, continuation) = AsyncStream.makeStream(of: Element.self)
        let id = Self.nextID()
        state.withLock { state in
            if let latest = state.latest { continuation.yield(latest) }
            if state.finished { continuation.finish() } else { state.streams[id] = continuation }
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.streams.removeValue(forKey: id) }
        }
        return stream
    }

    /// Calls `observer` with every element, on the posting thread: return quickly.
    ///
    /// - Returns: an id for ``removeObserver(_:)``.
    package func addObserver(_ observer: @escaping @Sendable (Element) -> Void) -> Int {
        let id = Self.nextID()
        state.withLock { $0.observers[id] = observer }
        return id
    }

    /// Stops calling an observer; an id this broadcaster does not hold is ignored.
    package func removeObserver(_ id: Int) {
        _ = state.withLock { $0.observers.removeValue(forKey: id) }
    }

    /// Hands `element` to every stream, then to every observer.
    package func post(_ element: Element) {
        let observers = state.withLock { state in
            if replaysLatest { state.latest = element }
            for continuation in state.streams.values { continuation.yield(element) }
            return Array(state.observers.values)
        }
        for observer in observers { observer(element) }
    }

    /// Ends every stream; later streams end at once, until ``reopen()``.
    package func finish() {
        let streams = state.withLock { state in
            state.finished = true
            defer { state.streams = [:] }
            return Array(state.streams.values)
        }
        for continuation in streams { continuation.finish() }
    }

    /// Lets streams run again (a monitor that runs anew).
    package func reopen() {
        state.withLock { $0.finished = false }
    }
}

private let _ids = Atomic<Int>(0)


/// Bytes the system may purge when they are not in use: Apple's `NSPurgeableData`, for Linux.
///
/// As on Apple platforms it is created *in use* (access count 1): call
/// ``endContentAccess()`` when done, and ``beginContentAccess()`` (checking its result)
/// before using the bytes again.
public final class PurgeableData: DiscardableContent, Sendable {
    private struct State {
        var bytes: [UInt8]?
        var accessCount = 1
    }
    private let state: Locked<State>

    /// Wraps bytes; the new object is in use.
    public init(bytes: [UInt8]) {
        state = Locked(State(bytes: bytes))
    }

    /// The length in bytes (0 once discarded).
    public var length: Int { state.withLock { $0.bytes?.count ?? 0 } }

    /// Runs `body` with the bytes, or returns `nil` when they were discarded. The caller
    /// must hold an access (``beginContentAccess()`` returned `true`).
    public func withBytes<T>(_ body: ([UInt8]) throws -> T) rethrows -> T? {
        guard let bytes = state.withLock({ $0.bytes }) else { return nil }
        return try body(bytes)
    }

    public func beginContentAccess() -> Bool {
        state.withLock { state in
            guard state.bytes != nil else { return false }
            state.accessCount += 1
            return true
        }
    }

    public func endContentAccess() {
        state.withLock { state in
            precondition(state.accessCount > 0, "endContentAccess() without a matching beginContentAccess()")
            state.accessCount -= 1
        }
    }

    public func discardContentIfPossible() {
        state.withLock { state in
            if state.accessCount == 0 { state.bytes = nil }
        }
    }

    public func isContentDiscarded() -> Bool {
        state.withLock { $0.bytes == nil }
    }
}

/// The time an ``EventLoop`` and what runs on it read: the monotonic clock, or a manual one a
/// test sets (``ManualClock``), so that deadlines, holds and intervals are tested without waiting.
package struct LoopClock: Sendable {
    private let read: @Sendable () -> ContinuousClock.Instant

    /// A clock that reads `read`.
    package init(_ read: @escaping @Sendable () -> ContinuousClock.Instant) {
        self.read = read
    }

    /// The monotonic clock (`CLOCK_MONOTONIC`, as `ContinuousClock` reads it on Linux).
    package static let continuous = LoopClock { .now }

    /// The current instant.
    package var now: ContinuousClock.Instant { read() }
}

/// A clock that stands still until it is told to move: tests drive a loop on it with
/// ``EventLoop/drive()``, advancing it past deadlines instead of sleeping until them.
package final class ManualClock: Sendable {
    private let instant: Locked<ContinuousClock.Instant>

    /// A clock standing at `start` (the real clock's instant now, by default).
    package init(at start: ContinuousClock.Instant = .now) {
        instant = Locked(start)
    }

    /// The instant it stands at.
    package var now: ContinuousClock.Instant { instant.withLock { $0 } }

    /// Moves it on by `duration`.
    package func advance(by duration: Duration) {
        instant.withLock { $0 += duration }
    }

    /// The clock a loop reads.
    package var clock: LoopClock { LoopClock { [instant] in instant.withLock { $0 } } }
}

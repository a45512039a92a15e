import MemwarnSystem
import Testing

@testable import MemwarnRelease
@testable import MemwarnStores

/// The default retention of a `ResourcePool` under repeated critical releases, on a manual
/// clock: a release closes only handles idle 10 s or more and leaves one open, waits longer when
/// closed handles come back at once, and reports only what it closed. (Under a 10 MiB limit a
/// pool that closed every idle handle at every critical release reopened them at the next
/// request, blocking: "shared-resources 430 MiB released" from 256 KiB handles.) Real
/// descriptors on `/dev/null`.
@Suite(.serialized)
struct ResourcePoolRetentionTests {
    static let bytesPerHandle = 256 << 10

    /// A pool of real descriptors with `retention`, on `clock`, in `coordinator`.
    static func pool(
        _ fixture: DescriptorPoolFixture, retention: ResourceRetention = .default, clock: ManualClock, coordinator: ReleaseCoordinator? = nil
    ) -> ResourcePool<Int32> {
        ResourcePool(
            name: "db", bytesPerHandle: bytesPerHandle, maximumCount: 4, retention: retention, coordinator: coordinator, onCloseError: nil,
            driver: .synchronous(open: { try fixture.open() }, close: { try fixture.close($0) }), clock: clock.clock)
    }

    /// Two requests at once, each with a handle.
    static func serveTwo(_ pool: ResourcePool<Int32>) async throws {
        try await pool.withResource { a in
            try await pool.withResource { b in #expect(writesOneByte(a) && writesOneByte(b)) }
        }
    }

    @Test func aReleaseClosesOnlyWhatHasBeenIdleLongEnoughAndLeavesOneOpen() async throws {
        let fixture = DescriptorPoolFixture()
        let clock = ManualClock()
        let pool = Self.pool(fixture, clock: clock)
        try await pool.withResource { a in
            try await pool.withResource { b in
                try await pool.withResource { c in #expect([a, b, c].allSatisfy(writesOneByte)) }
            }
        }
        let request = ReleaseRequest(level: .critical, tier: .sharedResources, targetBytes: .max)
        #expect(pool.release(request) == 0, "just used: nothing is closed")
        #expect(pool.inUseBytes == 3 * Self.bytesPerHandle, "what the retention keeps counts as in use")
        clock.advance(by: .seconds(9))
        #expect(pool.release(request) == 0, "idle 9 s: still kept")
        clock.advance(by: .seconds(1))
        // Idle 10 s: two of three closed, least recently used first; one stays open.
        #expect(pool.release(request) == 2 * Self.bytesPerHandle)
        #expect(fixture.closeCount == 2 && pool.openCount == 1)
        clock.advance(by: .seconds(600))
        #expect(pool.release(request) == 0, "the last handle stays open however long it idles")
        #expect(pool.closeIdle().closed == 1, "going to the background closes it")
        #expect(fixture.closeCount == 3 && pool.openCount == 0)
    }

    @Test func handlesThatComeBackAtOnceMakeThePoolWaitLongerThenItForgets() async throws {
        let fixture = DescriptorPoolFixture()
        let clock = ManualClock()
        let pool = Self.pool(fixture, clock: clock)
        let request = ReleaseRequest(level: .critical, tier: .sharedResources, targetBytes: .max)
        try await Self.serveTwo(pool)
        clock.advance(by: .seconds(10))
        #expect(pool.release(request) == Self.bytesPerHandle)  // one closed, one kept
        clock.advance(by: .seconds(2))
        try await Self.serveTwo(pool)  // it comes back 2 s later
        #expect(pool.comebackCount == 1 && fixture.openCount == 3)
        clock.advance(by: .seconds(10))
        #expect(pool.release(request) == 0, "after a comeback, 10 s idle is no longer enough")
        clock.advance(by: .seconds(10))
        #expect(pool.release(request) == Self.bytesPerHandle, "20 s idle is")
        clock.advance(by: .seconds(1))
        try await Self.serveTwo(pool)
        #expect(pool.comebackCount == 2)
        clock.advance(by: .seconds(20))
        #expect(pool.release(request) == 0, "after a second comeback, 40 s")
        // Five minutes without a comeback: back to 10 s.
        clock.advance(by: .seconds(280))
        #expect(pool.release(request) == Self.bytesPerHandle)
        #expect(fixture.closeCount * Self.bytesPerHandle == 3 * Self.bytesPerHandle)
        pool.closeIdle()
    }

    /// A request every 12 s and a critical release every second for ten minutes: without
    /// retention the pool closes and reopens a handle every request (and reports each close);
    /// with the default it stops after the first comeback and each five minutes after. What the
    /// coordinator's reports say was freed is exactly what was closed.
    @Test(arguments: [false, true])
    func repeatedCriticalReleasesDoNotThrashThePool(retained: Bool) async throws {
        let fixture = DescriptorPoolFixture()
        let clock = ManualClock()
        let coordinator = ReleaseCoordinator(trimsHeap: false)
        let pool = Self.pool(fixture, retention: retained ? .default : .none, clock: clock, coordinator: coordinator)
        var reported = 0
        for second in 0..<600 {
            if second % 12 == 0 { try await Self.serveTwo(pool) }
            reported += coordinator.release(level: .critical, targetBytes: 64 << 20).freedBytes
            clock.advance(by: .seconds(1))
        }
        #expect(reported == fixture.closeCount * Self.bytesPerHandle, "reported \(reported) bytes for \(fixture.closeCount) closes")
        if retained {
            #expect(fixture.openCount <= 6, "\(fixture.openCount) opens in 50 requests")
            #expect(pool.comebackCount <= 3)
        } else {
            #expect(fixture.openCount >= 90, "without retention every request reopens: \(fixture.openCount)")
        }
        pool.closeIdle()
    }

    @Test func theTrackerDoublesUpToTheLongestAndStartsFromOneSecondWhenTheMinimumIsZero() {
        let start = ContinuousClock.now
        var tracker = RetentionTracker(ResourceRetention(minimumIdle: .zero, minimumOpen: 0, comebackWindow: .seconds(5), longestIdle: .seconds(4)))
        #expect(tracker.requiredIdle(at: start) == .zero)
        var now = start
        for expected in [Duration.seconds(1), .seconds(2), .seconds(4), .seconds(4)] {
            tracker.released(1, at: now)
            now += .seconds(1)
            tracker.opened(at: now)
            #expect(tracker.requiredIdle(at: now) == expected)
        }
        tracker.released(1, at: now)
        now += .seconds(6)
        tracker.opened(at: now)  // outside the window: no comeback
        #expect(tracker.comebacks == 4)
        #expect(tracker.requiredIdle(at: now + .seconds(4)) == .zero, "the longest idle time passed without a comeback")
        #expect(RetentionTracker(.none).closable(idleSince: [start, start], openCount: 2, now: start) == 2)
    }
}

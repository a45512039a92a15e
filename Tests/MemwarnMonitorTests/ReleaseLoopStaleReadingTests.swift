import CgroupKit
import MemwarnRelease
import MemwarnSystem
import MemwarnTestFixtures
import Metrics
import Testing

@testable import MemwarnMonitor

/// A reading the release thread takes after a release that ended later than the reading was
/// taken shows usage from before that release. The release loop, on a manual clock, on the
/// test's thread: a rise among such readings is acted on (its warning is due), any other asks the
/// engine for a reading from after the release instead of releasing again from stale numbers.
struct ReleaseLoopStaleReadingTests {
    static let limit: UInt64 = 128 << 20

    /// A release loop over a synthetic host whose consumer's release takes 50 ms of the clock,
    /// counting the readings it asks for.
    final class Bench {
        let host: SyntheticHost
        let clock = ManualClock()
        let asks = SharedCount()
        let consumer = CacheFixtures.FakeConsumer("cache", tier: .caches, footprint: 64 << 20, releasesAtMost: 4 << 20)
        let loop: ReleaseLoop
        let sampler: SnapshotSampler
        /// Held here: a coordinator holds its consumers weakly.
        let slow: SlowConsumer

        init() throws {
            host = try SyntheticHost(limit: ReleaseLoopStaleReadingTests.limit)
            sampler = SnapshotSampler(layout: try CgroupDiscovery(files: host.files).layout(), files: host.files)
            let coordinators = AttachedCoordinators()
            let coordinator = ReleaseCoordinator(trimsHeap: false)
            slow = SlowConsumer(consumer, clock: clock)
            coordinator.register(slow)
            _ = coordinators.attach(coordinator, id: 1)
            loop = ReleaseLoop(
                context: .init(
                    sampler: sampler, policy: PressurePolicy(), clock: clock.clock, ledger: ReleaseLedger(),
                    metrics: MonitorMetrics(factory: MetricsSystem.factory), logger: testLogger, coordinators: coordinators,
                    exhaustionChanged: { _ in }, askForReading: { [asks] in asks.add() }))
        }

        /// A reading of the host now, as the engine would hand it over with its decision.
        func reading(rise: MemoryPressureLevel?, releaseLevel: MemoryPressureLevel?) throws -> MonitorReading {
            let snapshot = try sampler.sample()
            let level = releaseLevel ?? .normal
            return MonitorReading(
                event: LevelEvent(level: level, previous: rise == nil ? level : .normal, source: .usageSample, snapshot: snapshot),
                rise: rise, releaseLevel: releaseLevel, growthBytesPerSecond: 0, tally: ForecastTally(), readAt: clock.now,
                detectionBound: .milliseconds(10))
        }

        func handle(_ reading: MonitorReading) {
            loop.offer(reading)
            loop.handleWaitingReading()
        }
    }

    /// A consumer whose release takes 50 ms of the manual clock.
    final class SlowConsumer: MemoryConsumer, Sendable {
        let inner: CacheFixtures.FakeConsumer
        let clock: ManualClock
        init(_ inner: CacheFixtures.FakeConsumer, clock: ManualClock) { (self.inner, self.clock) = (inner, clock) }
        var name: String { inner.name }
        var tier: ReleaseTier { inner.tier }
        var footprintBytes: Int { inner.footprintBytes }
        func release(_ request: ReleaseRequest) -> Int {
            clock.advance(by: .milliseconds(50))
            return inner.release(request)
        }
    }

    @Test func aReadingTakenDuringAReleaseAsksForANewReadingInsteadOfReleasingAgain() throws {
        let bench = try Bench()
        try bench.host.setUsage(0.85)
        let rise = try bench.reading(rise: .warning, releaseLevel: .warning)
        bench.clock.advance(by: .milliseconds(10))
        let during = try bench.reading(rise: nil, releaseLevel: .warning)  // taken while the release runs
        bench.handle(rise)
        let released = bench.consumer.requests.count
        #expect(released > 0, "the rise released")
        #expect(bench.asks.value == 0)
        bench.handle(during)
        #expect(bench.consumer.requests.count == released, "no second release from numbers older than the first one's end")
        #expect(bench.asks.value == 1, "a reading from after the release is asked for")
        let after = try bench.reading(rise: nil, releaseLevel: .warning)  // what the engine reads next
        bench.handle(after)
        #expect(bench.consumer.requests.count > released, "a reading from after the release releases again")
        #expect(bench.asks.value == 1)
    }

    @Test func aRiseTakenDuringAReleaseIsStillActedOn() throws {
        let bench = try Bench()
        try bench.host.setUsage(0.85)
        let warning = try bench.reading(rise: .warning, releaseLevel: .warning)
        try bench.host.setUsage(0.95)
        bench.clock.advance(by: .milliseconds(10))
        let critical = try bench.reading(rise: .critical, releaseLevel: .critical)
        bench.handle(warning)
        let released = bench.consumer.requests.count
        bench.handle(critical)
        #expect(bench.asks.value == 0, "a rise is not put off")
        let later = bench.consumer.requests.dropFirst(released)
        #expect(!later.isEmpty && later.allSatisfy { $0.level == .critical }, "\(later)")
    }
}

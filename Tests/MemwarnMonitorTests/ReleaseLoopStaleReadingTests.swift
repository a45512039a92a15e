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
        let coordinator = ReleaseCoordinator(trimsHeap: false)

        /// - Parameter usageAfterRelease: the host's usage (a fraction of the limit) once a release
        ///   ends, `nil` to leave it.
        init(usageAfterRelease: Double? = nil) throws {
            host = try SyntheticHost(limit: ReleaseLoopStaleReadingTests.limit)
            sampler = SnapshotSampler(layout: try CgroupDiscovery(files: host.files).layout(), files: host.files)
            let coordinators = AttachedCoordinators()
            // The release runs on the test's thread (handleWaitingReading), where the host is used.
            nonisolated(unsafe) let host = host
            slow = SlowConsumer(consumer, clock: clock) {
                if let usageAfterRelease { try? host.setUsage(usageAfterRelease) }
            }
            coordinator.register(slow)
            _ = coordinators.attach(coordinator, id: 1)
            loop = ReleaseLoop(
                context: .init(
                    sampler: sampler, policy: PressurePolicy(), clock: clock.clock, ledger: ReleaseLedger(),
                    metrics: MonitorMetrics(factory: MetricsSystem.factory), logger: testLogger, coordinators: coordinators,
                    exhaustionChanged: { _ in }, askForReading: { [asks] in asks.add() }))
        }

        /// A reading of the host now, as the engine would hand it over with its decision.
        func reading(rise: MemoryPressureLevel?, releaseLevel: MemoryPressureLevel?, growth: Double = 0) throws -> MonitorReading {
            let snapshot = try sampler.sample()
            let level = releaseLevel ?? .normal
            return MonitorReading(
                event: LevelEvent(level: level, previous: rise == nil ? level : .normal, source: .usageSample, snapshot: snapshot),
                rise: rise, releaseLevel: releaseLevel, growthBytesPerSecond: growth, tally: ForecastTally(), readAt: clock.now,
                detectionBound: .milliseconds(10))
        }

        func handle(_ reading: MonitorReading) {
            loop.offer(reading)
            loop.handleWaitingReading()
        }
    }

    /// A consumer whose release takes 50 ms of the manual clock (and then does `released`).
    final class SlowConsumer: MemoryConsumer, Sendable {
        let inner: CacheFixtures.FakeConsumer
        let clock: ManualClock
        let released: @Sendable () -> Void
        init(_ inner: CacheFixtures.FakeConsumer, clock: ManualClock, released: @escaping @Sendable () -> Void) {
            (self.inner, self.clock, self.released) = (inner, clock, released)
        }
        var name: String { inner.name }
        var tier: ReleaseTier { inner.tier }
        var footprintBytes: Int { inner.footprintBytes }
        func release(_ request: ReleaseRequest) -> Int {
            clock.advance(by: .milliseconds(50))
            defer { released() }
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

    @Test func aRiseTakenDuringAReleaseIsSizedFromThatReleasesMeasurement() throws {
        // The first release brings usage to 80 %; the critical reading, taken before it ended,
        // still says 95 %.
        let bench = try Bench(usageAfterRelease: 0.80)
        try bench.host.setUsage(0.85)
        let warning = try bench.reading(rise: .warning, releaseLevel: .warning)
        try bench.host.setUsage(0.95)
        let critical = try bench.reading(rise: .critical, releaseLevel: .critical)
        let stale = ReleaseCoordinator.target(for: critical.event.snapshot, policy: PressurePolicy())
        bench.handle(warning)
        let measured = ReleaseCoordinator.target(for: try bench.sampler.sample(), policy: PressurePolicy())
        #expect(measured < stale, "the release's measurement is below the stale reading: \(measured) < \(stale)")
        let released = bench.consumer.requests.count
        bench.handle(critical)
        let first = try #require(bench.consumer.requests.dropFirst(released).first)
        #expect(first.level == .critical)
        #expect(first.targetBytes == measured, "sized from the measurement (\(measured)), not the stale reading (\(stale)): \(first.targetBytes)")
    }

    @Test func aLateReadingIsSizedWithItsAgeAsLeadTimeAndNotReadAgain() throws {
        let bench = try Bench()
        try bench.host.setUsage(0.85)
        let growth = 100.0 * 1_048_576
        let reading = try bench.reading(rise: .warning, releaseLevel: .warning, growth: growth)
        bench.clock.advance(by: .milliseconds(50))  // the release thread takes it 50 ms late
        let readingsBefore = bench.sampler.readCount
        bench.handle(reading)
        let expected = ReleaseTarget.make(
            for: reading.event.snapshot, policy: PressurePolicy(), growthBytesPerSecond: growth, leadTime: reading.detectionBound + .milliseconds(50))
        let first = try #require(bench.consumer.requests.first)
        #expect(first.targetBytes == expected.bytes, "headroom for 60 ms of growth (the 10 ms bound and the 50 ms age): \(first.targetBytes)")
        let withoutAge = ReleaseTarget.make(
            for: reading.event.snapshot, policy: PressurePolicy(), growthBytesPerSecond: growth, leadTime: reading.detectionBound)
        #expect(expected.bytes > withoutAge.bytes, "the age counts")
        #expect(bench.sampler.readCount == readingsBefore, "no reading taken afresh")
        #expect(bench.sampler.measurementCount == 1, "one measurement: what the release did")
    }

    /// A responder that frees nothing. (Whether it ran within its deadline is not the subject:
    /// the release measures what the responders freed either way.)
    final class QuickResponder: MemoryWarningResponder {
        var memoryWarningDeadline: Duration { .milliseconds(50) }
        func didReceiveMemoryWarning(level: MemoryPressureLevel) async {}
    }

    @Test func aWarningWithRespondersMeasuresTwiceWhatTheyFreedAndWhatTheReleaseDid() throws {
        let bench = try Bench()
        let responder = QuickResponder()
        _ = bench.coordinator.addWarningResponder(responder)
        try bench.host.setUsage(0.85)
        bench.handle(try bench.reading(rise: .warning, releaseLevel: .warning))
        #expect(!bench.consumer.requests.isEmpty)
        #expect(bench.sampler.measurementCount == 2, "what the responders freed, then what the release did: \(bench.sampler.measurementCount)")
    }

    /// The ask's round trip on a driven engine: a reading the engine took while a release ran
    /// (here, from inside the consumer's release) is not released on; the release loop asks, the
    /// engine reads again on its loop, and that reading, from after the release, releases.
    @Test func theEngineAnswersTheAskWithAReadingFromAfterTheRelease() throws {
        let host = try SyntheticHost(limit: Self.limit, usage: Self.limit / 2)
        var policy = PressurePolicy()
        policy.worstCaseGrowthBytesPerSecond = 0
        let driven = try DrivenEngine(files: host.files, policy: policy)
        let consumer = CacheFixtures.FakeConsumer("cache", tier: .caches, footprint: 64 << 20, releasesAtMost: 1 << 20)
        nonisolated(unsafe) var readDuringRelease = true
        let during = CallbackConsumer(consumer) {
            // The engine reads while the release runs (once), and the release takes 50 ms.
            if readDuringRelease { driven.read(source: .usageSample) }
            readDuringRelease = false
            driven.clock.advance(by: .milliseconds(50))
        }
        let coordinator = ReleaseCoordinator(trimsHeap: false)
        coordinator.register(during)
        _ = driven.coordinators.attach(coordinator, id: 1)
        try driven.start()
        try host.setUsage(0.85)
        try host.overwrite("/sys/fs/cgroup/app/memory.events", "low 0\nhigh 1\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n")
        try driven.turn()
        let released = consumer.requests.count
        #expect(released > 0 && !readDuringRelease, "the warning released, and the engine read during it")
        let readings = driven.readings.count
        try driven.turn()  // the reading taken during the release: stale, and no rise
        #expect(consumer.requests.count == released, "not released on")
        #expect(driven.readings.count == readings, "the engine has not read yet: the ask waits on its loop")
        try driven.turn()  // the loop runs the ask: a reading, which releases
        #expect(driven.readings.count == readings + 1, "one reading answers the ask")
        let answer = try #require(driven.readings.last)
        #expect(answer.releaseLevel == .warning && answer.rise == nil)
        #expect(consumer.requests.count > released, "the reading from after the release releases")
    }

    /// A consumer that runs `during` inside each release, before releasing.
    final class CallbackConsumer: MemoryConsumer, @unchecked Sendable {
        // @unchecked: `during` is not @Sendable; the driven engine's release loop calls it on the test's own thread.
        let inner: CacheFixtures.FakeConsumer
        let during: () -> Void
        init(_ inner: CacheFixtures.FakeConsumer, during: @escaping () -> Void) { (self.inner, self.during) = (inner, during) }
        var name: String { inner.name }
        var tier: ReleaseTier { inner.tier }
        var footprintBytes: Int { inner.footprintBytes }
        func release(_ request: ReleaseRequest) -> Int {
            during()
            return inner.release(request)
        }
    }
}

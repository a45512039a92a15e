import CgroupKit
import MemwarnRelease
import MemwarnStores
import MemwarnSystem
import MemwarnTestFixtures
import MemwarnTestKit
import MetricsTestKit
import Testing

@testable import MemwarnMonitor

/// The proactive trim at work on a real `DiscardableCache`: the release loop on a manual clock
/// over a synthetic v2 host (its PSI file written by the test), each step taken on the test's
/// thread; then a real monitor whose own release thread steps and, when it stops, lifts the
/// ceilings it set.
struct ProactiveTrimTests {
    static let interval = Duration.seconds(6)
    static let entryCost = 1024
    static let entries = 1000

    /// A release loop with the trim on, one cache of 1,000 entries of 1 KiB registered.
    final class Bench {
        let host: SyntheticHost
        let clock = ManualClock()
        let sampler: SnapshotSampler
        let coordinator = ReleaseCoordinator(trimsHeap: false)
        let cache: DiscardableCache<Int, Int>
        let metrics = TestMetrics()
        let loop: ReleaseLoop
        private var nextKey = 0

        init(policy: PressurePolicy = Bench.trimming) throws {
            host = try SyntheticHost(limit: 1 << 30)
            try host.setUsage(0.3)
            try host.write("/sys/fs/cgroup/app/memory.pressure", Bench.pressure(some: 0))
            sampler = SnapshotSampler(layout: try CgroupDiscovery(files: host.files).layout(), files: host.files)
            cache = DiscardableCache(coordinator: coordinator)
            cache.name = "pages"
            let coordinators = AttachedCoordinators()
            _ = coordinators.attach(coordinator, id: 1)
            loop = ReleaseLoop(
                context: .init(
                    sampler: sampler, policy: policy, clock: clock.clock, ledger: ReleaseLedger(),
                    metrics: MonitorMetrics(factory: metrics), logger: testLogger, coordinators: coordinators,
                    exhaustionChanged: { _ in }, askForReading: {}))
            refill(ProactiveTrimTests.entries)
        }

        static var trimming: PressurePolicy {
            var policy = PressurePolicy()
            policy.trimInterval = ProactiveTrimTests.interval
            return policy
        }

        static func pressure(some: Double) -> String {
            "some avg10=\(some) avg60=0.00 avg300=0.00 total=0\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
        }

        /// Sets `count` keys the cache never held.
        func refill(_ count: Int) {
            for _ in 0..<count {
                cache.setObject(nextKey, forKey: nextKey, cost: ProactiveTrimTests.entryCost)
                nextKey += 1
            }
        }

        /// Moves the clock on by an interval, refilling `refills` keys meanwhile, and takes a step.
        func step(refilling refills: Int = 0) {
            refill(refills)
            clock.advance(by: ProactiveTrimTests.interval)
            loop.takeTrimStep()
        }

        /// Hands the loop a reading at `level` that asks for no release (a level held).
        /// `memwarn_trim_steps_total` for an outcome.
        func steps(_ outcome: String) throws -> Int64 {
            try metrics.expectCounter("memwarn_trim_steps_total", [("outcome", outcome)]).totalValue
        }

        func offer(level: MemoryPressureLevel) throws {
            let reading = MonitorReading(
                event: LevelEvent(level: level, previous: level, source: .usageSample, snapshot: try sampler.sample()),
                rise: nil, releaseLevel: nil, growthBytesPerSecond: 0, tally: ForecastTally(), readAt: clock.now,
                detectionBound: .milliseconds(10))
            loop.offer(reading)
            loop.handleWaitingReading()
        }
    }

    @Test func calmStepsLowerTheCeilingAndTheCacheKeepsToIt() throws {
        let bench = try Bench()
        let full = bench.cache.totalCost
        bench.step()  // meets the cache
        bench.step()  // measures its refills
        #expect(bench.cache.trimCeilingBytes == nil)
        var ceilings: [Int] = []
        for _ in 0..<5 {
            bench.step()
            ceilings.append(try #require(bench.cache.trimCeilingBytes))
            #expect(bench.cache.totalCost <= ceilings.last!)
        }
        #expect(ceilings == ceilings.sorted(by: >) && Set(ceilings).count == 5, "each step lowers it: \(ceilings)")
        #expect(ceilings.last! < full && ceilings.last! > full * 9 / 10)
        #expect(bench.cache.totalCostLimit == 0, "the cache's own limit is untouched")
        bench.refill(100)
        #expect(bench.cache.totalCost <= ceilings.last!, "new entries keep to the ceiling")
        #expect(try bench.steps("lowered") == 5 && bench.steps("backed_off") == 0)
    }

    @Test func refillsThatRiseRaiseTheCeilingAgain() throws {
        let bench = try Bench()
        bench.step()
        bench.step(refilling: 50)  // growing: refills at a rate never seen before
        bench.step(refilling: 50)  // as many: settled, measured
        bench.step(refilling: 50)
        bench.step(refilling: 50)
        let lowest = try #require(bench.cache.trimCeilingBytes)
        bench.step(refilling: 400)
        let raised = try #require(bench.cache.trimCeilingBytes)
        #expect(raised > lowest)
        #expect(try bench.steps("backed_off") == 1)
        for _ in 0..<3 { bench.step(refilling: 400) }
        #expect(bench.cache.trimCeilingBytes == raised, "held after the back-off")
    }

    @Test(arguments: [MemoryPressureLevel.warning, .critical])
    func aRaisedLevelHoldsTheTrim(level: MemoryPressureLevel) throws {
        let bench = try Bench()
        bench.step()
        try bench.offer(level: level)
        for _ in 0..<4 { bench.step() }
        #expect(bench.cache.trimCeilingBytes == nil)
        try bench.offer(level: .normal)
        bench.step()  // measures afresh
        bench.step()
        #expect(bench.cache.trimCeilingBytes != nil)
    }

    @Test func memoryStallsAtTheMarkHoldTheTrim() throws {
        let bench = try Bench()
        try bench.host.overwrite("/sys/fs/cgroup/app/memory.pressure", Bench.pressure(some: 1.0))
        for _ in 0..<4 { bench.step() }
        #expect(bench.cache.trimCeilingBytes == nil)
        try bench.host.overwrite("/sys/fs/cgroup/app/memory.pressure", Bench.pressure(some: 0.5))
        bench.step()
        bench.step()
        #expect(bench.cache.trimCeilingBytes != nil)
    }

    @Test func theDefaultPolicyTrimsNothing() throws {
        let bench = try Bench(policy: PressurePolicy())
        for _ in 0..<5 { bench.step() }
        #expect(bench.cache.trimCeilingBytes == nil)
        #expect(bench.cache.count == ProactiveTrimTests.entries)
        #expect(try bench.steps("lowered") == 0, "the family is there, at 0")
    }

    /// A real monitor, its release thread stepping every 100 ms of the real clock: the cache's
    /// ceiling falls while it runs, and is gone once the run has ended.
    @Test func aRunningMonitorTrimsAndLiftsItsCeilingsWhenItStops() async throws {
        let host = try SyntheticHost(limit: 1 << 30)
        try host.setUsage(0.3)
        var configuration = MonitorConfiguration(policy: PressurePolicy(), environment: [:])
        configuration.policy.trimInterval = .milliseconds(100)
        configuration.files = host.files
        configuration.watchesPressureStall = false
        let monitor = PressureMonitor(configuration: configuration, logger: testLogger)
        let coordinator = ReleaseCoordinator(trimsHeap: false)
        let cache = DiscardableCache<Int, Int>(coordinator: coordinator)
        for key in 0..<Self.entries { cache.setObject(key, forKey: key, cost: Self.entryCost) }
        let token = coordinator.attach(to: monitor)
        defer { monitor.removeObserver(token) }
        try await withRunningMonitor(monitor) { iterator in
            #expect(try await next(&iterator).level == .normal)
            try await waitUntil(within: .seconds(30), "the trim lowered the cache twice") {
                (cache.trimCeilingBytes ?? .max) < Self.entries * Self.entryCost * 98 / 100
            }
        }
        #expect(cache.trimCeilingBytes == nil, "the run ended: the ceiling is lifted")
        #expect(cache.count < Self.entries, "what the trim took stays taken")
    }
}

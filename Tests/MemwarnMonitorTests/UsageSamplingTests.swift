import CgroupKit
import MemwarnTestFixtures
import Testing

@testable import MemwarnMonitor
@testable import MemwarnRelease

/// The usage sampler's own logic, driven by hand on a synthetic host's files (no kernel, no
/// engine): when it reads, what a reading says, and how guarded mode and the slack behave.
struct UsageSamplingTests {
    static let limit: UInt64 = 128 << 20

    static func sampler(_ host: SyntheticHost, policy: PressurePolicy = PressurePolicy()) throws -> UsageSampling {
        try UsageSampling(cgroup: host.cgroup, measuresSystem: false, policy: policy, files: host.files, because: "a test")
    }

    static func snapshot(_ host: SyntheticHost, _ fraction: Double) -> PressureSnapshot {
        PressureSnapshot(
            time: .zero, cgroup: host.cgroup, usageBytes: UInt64(Double(host.limit) * fraction),
            limit: EffectiveLimit(bytes: host.limit, file: "memory.max", cgroupPath: "/app"), system: nil, pressure: nil, pressureFile: nil)
    }

    static func isWake(_ report: PressureSourceReport, _ signal: PressureSignal) -> Bool {
        if case .wake(.readNow, let seen, _) = report { return seen == signal }
        return false
    }

    static func isQuiet(_ report: PressureSourceReport) -> Bool {
        if case .quiet = report { return true }
        return false
    }

    @Test func continuousSamplingWakesOnAThresholdCrossingAndWaitsByTheDistanceToTheNextMark() throws {
        let host = try SyntheticHost(limit: Self.limit)
        let sampler = try Self.sampler(host)
        let start = ContinuousClock.now
        try sampler.observe(Self.snapshot(host, 0.5), at: start)
        let next = try #require(sampler.nextRead(after: start))
        let expected = Double(Self.limit) * 0.3 / Double(1 << 30)  // 30 % of 128 MiB to the warning mark, at 1 GiB/s
        #expect(abs((next - start).seconds - expected) < 0.001, "\(next - start)")
        try host.setUsage(0.5)
        #expect(Self.isQuiet(sampler.sample(at: start + .milliseconds(20))))
        try host.setUsage(0.56)
        #expect(Self.isWake(sampler.sample(at: start + .milliseconds(40)), .usageSample), "across the 55 % threshold")
        #expect(Self.isQuiet(sampler.sample(at: start + .milliseconds(60))), "the same side: nothing new")
    }

    @Test func aFallCountsOnlyOnceUsageIsASlackBelowTheThreshold() throws {
        let host = try SyntheticHost(limit: Self.limit)
        let sampler = try Self.sampler(host)
        let start = ContinuousClock.now
        try sampler.observe(Self.snapshot(host, 0.56), at: start)
        try host.setUsage(0.545)  // below 55 %, within 1 % of it
        #expect(Self.isQuiet(sampler.sample(at: start + .milliseconds(10))))
        try host.setUsage(0.535)
        #expect(Self.isWake(sampler.sample(at: start + .milliseconds(20)), .usageSample))
    }

    @Test func aFullReadingIsDueOncePerPollInterval() throws {
        let host = try SyntheticHost(limit: Self.limit, usage: 0)
        let sampler = try Self.sampler(host)
        let start = ContinuousClock.now
        try sampler.observe(Self.snapshot(host, 0), at: start)
        #expect(Self.isQuiet(sampler.sample(at: start + .milliseconds(500))))
        #expect(Self.isWake(sampler.sample(at: start + .seconds(1)), .poll))
    }

    @Test func withAdaptiveSamplingOffItPollsEveryPollInterval() throws {
        var policy = PressurePolicy()
        policy.worstCaseGrowthBytesPerSecond = 0
        let host = try SyntheticHost(limit: Self.limit)
        let sampler = try Self.sampler(host, policy: policy)
        #expect(sampler.description.hasPrefix("poll /sys/fs/cgroup/app/memory.current every 1s"), "\(sampler.description)")
        let start = ContinuousClock.now
        try sampler.observe(Self.snapshot(host, 0.79), at: start)
        #expect(sampler.nextRead(after: start) == start + .seconds(1))
    }

    /// A sampler in guarded mode (the kernel's thresholds registered), its band, and the warning mark.
    static func guarded() throws -> (host: SyntheticHost, sampler: UsageSampling, band: UInt64, mark: UInt64) {
        let host = try SyntheticHost(limit: limit)
        let sampler = try Self.sampler(host)
        sampler.enterGuardedMode(for: ["\(host.cgroup.path)|memory.max"])
        return (host, sampler, sampler.guardBand(capacity: limit), UInt64(Double(limit) * 0.8))
    }

    static func snapshot(_ host: SyntheticHost, bytes: UInt64) -> PressureSnapshot { snapshot(host, Double(bytes) / Double(host.limit)) }

    @Test func guardedSamplingReadsOnlyInABandAndWakesOnASecondLookAtACrossing() throws {
        let (host, sampler, band, mark) = try Self.guarded()
        let start = ContinuousClock.now
        let file = "/sys/fs/cgroup/app/memory.current"
        try sampler.observe(Self.snapshot(host, 0.5), at: start)
        #expect(sampler.nextRead(after: start) == nil, "far below every mark: no sampling")

        try sampler.observe(Self.snapshot(host, bytes: mark - band / 2), at: start)
        #expect(sampler.nextRead(after: start) == start + .milliseconds(100), "in the band, no rise measured: the cap")
        try host.overwrite(file, SyntheticHost.fixedWidth(mark - band / 2))
        #expect(Self.isQuiet(sampler.sample(at: start + .milliseconds(100))))
        #expect(sampler.nextRead(after: start) == start + .milliseconds(100), "unchanged: the cap again")

        // A rise of a quarter band in 10 ms leaves a quarter band to the mark: read 10 ms later.
        try host.overwrite(file, SyntheticHost.fixedWidth(mark - band / 4))
        #expect(Self.isQuiet(sampler.sample(at: start + .milliseconds(110))))
        let rising = try #require(sampler.nextRead(after: start))
        #expect(abs((rising - start).seconds - 0.010) < 0.0005, "\(rising - start)")

        try host.overwrite(file, SyntheticHost.fixedWidth(mark + 4096))
        #expect(Self.isQuiet(sampler.sample(at: start + .milliseconds(120))), "first look: the kernel may report it yet")
        #expect(sampler.nextRead(after: start) == start + .milliseconds(5), "looked at again soon")
        #expect(Self.isWake(sampler.sample(at: start + .milliseconds(125)), .usageSample), "second look: unreported")
    }

    /// The kernel reported its guard crossed, but the reading that followed found usage a little
    /// under the guard (a few pages freed, or a CPU's charge stock drained, after the kernel's
    /// check). The kernel reports nothing more until a check of its own sees usage under the
    /// guard: a small step back up and across the mark must still be sampled.
    @Test func aReadingJustUnderTheGuardAfterItsEventStillSamples() throws {
        let (host, sampler, band, mark) = try Self.guarded()
        let start = ContinuousClock.now
        try sampler.observe(Self.snapshot(host, bytes: mark - band - (256 << 10)), at: start)
        #expect(sampler.nextRead(after: start) == start + .milliseconds(100))
        try host.overwrite("/sys/fs/cgroup/app/memory.current", SyntheticHost.fixedWidth(mark + 4096))
        #expect(Self.isQuiet(sampler.sample(at: start + .milliseconds(100))))
        #expect(Self.isWake(sampler.sample(at: start + .milliseconds(105)), .usageSample))
    }

    @Test func aCrossingTheKernelReportedMeanwhileIsNotReportedAgain() throws {
        let (host, sampler, _, mark) = try Self.guarded()
        let start = ContinuousClock.now
        try sampler.observe(Self.snapshot(host, 0.79), at: start)
        try host.overwrite("/sys/fs/cgroup/app/memory.current", SyntheticHost.fixedWidth(mark + 4096))
        #expect(Self.isQuiet(sampler.sample(at: start + .milliseconds(5))))
        try sampler.observe(Self.snapshot(host, bytes: mark + 4096), at: start + .milliseconds(6))  // the kernel's event
        #expect(Self.isQuiet(sampler.sample(at: start + .milliseconds(10))))
    }

    @Test func usageIsSampledUpToTwoBandWidthsBelowAMarkAndNotFurther() throws {
        let (host, sampler, band, mark) = try Self.guarded()
        let start = ContinuousClock.now
        try sampler.observe(Self.snapshot(host, bytes: mark - band / 2), at: start)
        #expect(sampler.nextRead(after: start) != nil)
        try sampler.observe(Self.snapshot(host, bytes: mark - band * 3 / 2), at: start)
        #expect(sampler.nextRead(after: start) != nil, "just out of the band: still sampled")
        try sampler.observe(Self.snapshot(host, bytes: mark - band * 5 / 2), at: start)
        #expect(sampler.nextRead(after: start) == nil, "two band widths below: the kernel's guard sees a return")
    }

    @Test func aNewLimitMovesEveryMark() throws {
        let host = try SyntheticHost(limit: Self.limit)
        let sampler = try Self.sampler(host)
        let start = ContinuousClock.now
        try sampler.observe(Self.snapshot(host, 0.5), at: start)  // 64 MiB of 128: far below 80 %
        var halved = Self.snapshot(host, 0.5)
        halved.limit?.bytes = Self.limit / 2  // the same usage is now the whole limit
        try sampler.observe(halved, at: start)
        #expect(sampler.nextRead(after: start) == start + SamplingRule.shortestInterval, "at the new limit: read as often as allowed")
    }

    /// The limit of the page cache cases: large enough that a guard band is a small share of it
    /// on any number of CPUs.
    static let pageCacheLimit: UInt64 = 4 << 30

    /// A guarded sampler that leaves inactive page cache out, on a host whose `memory.stat` says
    /// `inactive`; and a reading of usage less it (`usage`), with it left out.
    static func guardedLeavingPageCacheOut(inactive: UInt64) throws -> (host: SyntheticHost, sampler: UsageSampling, band: UInt64) {
        let host = try SyntheticHost(limit: pageCacheLimit)
        try host.write(host.cgroup.file("memory.stat"), "anon 0\ninactive_file \(inactive)\nactive_file 0\n")
        var policy = PressurePolicy()
        policy.countsInactivePageCache = false
        let sampler = try Self.sampler(host, policy: policy)
        sampler.enterGuardedMode(for: ["\(host.cgroup.path)|memory.max"])
        return (host, sampler, sampler.guardBand(capacity: pageCacheLimit))
    }

    static func snapshot(_ host: SyntheticHost, usage: Double, inactive: Double?) -> PressureSnapshot {
        var snapshot = Self.snapshot(host, usage)
        let limit = EffectiveLimit(bytes: host.limit, file: "memory.max", cgroupPath: "/app")
        snapshot.constraints = [
            MemoryConstraint(
                cgroupPath: "/app", usageBytes: UInt64(Double(host.limit) * usage), limit: limit,
                inactiveFileBytes: inactive.map { UInt64(Double(host.limit) * $0) })
        ]
        return snapshot
    }

    /// Guarded, page cache left out: the kernel's thresholds (on usage with the page cache) stand
    /// in for reads unless the page cache hides a mark; usage with it past the lowest guard is not
    /// enough. Marks at 70, 80 and 90 % of the limit.
    @Test func leavingPageCacheOutAGuardedGaugeReadsOnlyWherePageCacheHidesAMark() throws {
        let (host, sampler, band) = try Self.guardedLeavingPageCacheOut(inactive: 0)
        let start = ContinuousClock.now
        try #require(Double(band) / Double(Self.pageCacheLimit) < 0.025, "the cases below assume a band under 2.5 % of the limit")
        try sampler.observe(Self.snapshot(host, usage: 0.3, inactive: 0.2), at: start)
        #expect(sampler.nextRead(after: start) == nil, "with the page cache, 50 %: below every guard")
        try sampler.observe(Self.snapshot(host, usage: 0.72, inactive: 0.02), at: start)
        #expect(sampler.nextRead(after: start) == nil, "74 % with it, 72 % without: past the lowest guard, no mark hidden, in no band")
        try sampler.observe(Self.snapshot(host, usage: 0.72, inactive: 0.1), at: start)
        #expect(sampler.nextRead(after: start) != nil, "82 % with it, 72 % without: the warning mark is hidden")
        try sampler.observe(Self.snapshot(host, usage: 0.3, inactive: 0.65), at: start)
        #expect(sampler.nextRead(after: start) != nil, "95 % with it, 30 % without: every mark is hidden")
        try sampler.observe(Self.snapshot(host, 0.3), at: start)
        #expect(sampler.nextRead(after: start) != nil, "a reading that does not say how much page cache there is: read")
    }

    /// Where the page cache hides a mark, usage less it crossing a threshold wakes the monitor at
    /// the first look: the kernel never reports usage less the page cache.
    @Test func leavingPageCacheOutACrossingOfUsageLessItWakesAtTheFirstLook() throws {
        let (host, sampler, _) = try Self.guardedLeavingPageCacheOut(inactive: UInt64(Double(Self.pageCacheLimit) * 0.1))
        let start = ContinuousClock.now
        try sampler.observe(Self.snapshot(host, usage: 0.72, inactive: 0.1), at: start)
        try host.setUsage(0.82)
        #expect(Self.isQuiet(sampler.sample(at: start + .milliseconds(10))), "unchanged: 72 % less the page cache")
        // Anonymous memory takes the page cache's place: usage with it stays at 82 %.
        try host.overwrite(host.cgroup.file("memory.stat"), "anon 0\ninactive_file \(UInt64(Double(Self.pageCacheLimit) * 0.04))\nactive_file 0\n")
        #expect(Self.isWake(sampler.sample(at: start + .milliseconds(20)), .usageSample), "78 % less the page cache: across 75 %")
    }
}

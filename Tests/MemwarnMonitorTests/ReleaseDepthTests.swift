import MemwarnRelease
import Testing

@testable import MemwarnMonitor

/// How far an automatic release takes usage: a rise's release and a release at `critical` below
/// the recovery mark; a release while the level stays raised at `warning` just under the warning
/// mark, so that a cache that refills at once keeps more of what it holds.
struct ReleaseDepthTests {
    typealias Bench = ReleaseLoopStaleReadingTests.Bench
    static let limit = ReleaseLoopStaleReadingTests.limit

    @Test func theRepeatMarkIsAQuarterOfTheBandUnderTheWarningMark() {
        let marks = LevelMarks(policy: PressurePolicy(), capacityBytes: 64 << 20)
        let ratio = marks.repeatReleaseRatio(growthBytesPerSecond: 0)
        #expect(abs(ratio - 0.775) < 1e-9, "\(ratio)")
    }

    @Test func onASmallLimitTheRepeatMarkIsTheSmallestReleaseUnderTheWarningMark() {
        // A quarter of the band is 0.4 MiB of a 16 MiB limit; the smallest release is 1 MiB.
        let marks = LevelMarks(policy: PressurePolicy(), capacityBytes: 16 << 20)
        let ratio = marks.repeatReleaseRatio(growthBytesPerSecond: 0)
        #expect(abs(ratio - (0.80 - 1.0 / 16)) < 1e-9, "\(ratio)")
    }

    @Test func theRepeatMarkLeavesRoomForAQuarterSecondOfGrowth() {
        let marks = LevelMarks(policy: PressurePolicy(), capacityBytes: 100 << 20)
        // 20 MiB/s: 5 MiB (5 %) under the warning mark, more than a quarter of the band (2.5 %).
        let ratio = marks.repeatReleaseRatio(growthBytesPerSecond: 20 * 1_048_576)
        #expect(abs(ratio - 0.75) < 1e-9, "\(ratio)")
        // From 40 MiB/s: the recovery mark, as for a rise.
        #expect(abs(marks.repeatReleaseRatio(growthBytesPerSecond: 40 * 1_048_576) - 0.70) < 1e-9)
        #expect(marks.repeatReleaseRatio(growthBytesPerSecond: 41 * 1_048_576) == 0.70)
        #expect(marks.repeatReleaseRatio(growthBytesPerSecond: 400 * 1_048_576) == 0.70)
        #expect(
            marks.repeatReleaseRatio(growthBytesPerSecond: .infinity) == marks.repeatReleaseRatio(growthBytesPerSecond: 0), "an unknown rate counts as none")
    }

    @Test func theRepeatMarkIsNeverBelowTheRecoveryMark() throws {
        var policy = PressurePolicy()
        policy.recoveryRatio = 0.79
        try policy.validate()
        let marks = LevelMarks(policy: policy, capacityBytes: 64 << 20)
        #expect(marks.repeatReleaseRatio(growthBytesPerSecond: 0) == 0.79)
    }

    /// The first request of the release a reading asks for, with usage at `share` of the limit,
    /// and the bytes usage stands over the mark at `ratio` (what a release to that mark asks).
    static func firstRequest(
        atUsage share: Double, _ reading: (Bench) throws -> MonitorReading
    ) throws -> (request: ReleaseRequest, overMark: (Double) -> Int) {
        let bench = try Bench()
        try bench.host.setUsage(share)
        bench.handle(try reading(bench))
        let request = try #require(bench.consumer.requests.first)
        let usage = Int(try bench.sampler.sample().usageBytes)
        return (request, { ratio in usage - Int(LevelMarks.bytes(ratio, of: Self.limit)) })
    }

    @Test func aReleaseWhileTheLevelStaysRaisedTakesUsageJustUnderTheWarningMark() throws {
        let (first, overMark) = try Self.firstRequest(atUsage: 0.85) { try $0.reading(rise: nil, releaseLevel: .warning) }
        #expect(first.level == .warning)
        #expect(first.targetBytes == overMark(0.775), "to 77.5 % of the limit: \(first.targetBytes)")
    }

    @Test func aReleaseWhileRaisedUnderFastGrowthTakesUsageBelowTheRecoveryMark() throws {
        // 64 MiB/s under 128 MiB: half the limit a second, past the quarter second's room.
        let (first, overMark) = try Self.firstRequest(atUsage: 0.85) { try $0.reading(rise: nil, releaseLevel: .warning, growth: 64 * 1_048_576) }
        #expect(first.targetBytes >= overMark(0.70), "at least to 70 % of the limit: \(first.targetBytes)")
    }

    /// A reading handed over with the given levels (the monitor's before and after it), asking
    /// for a release at `.warning` with no rise.
    static func repeatAtWarning(_ bench: Bench, level: MemoryPressureLevel, previous: MemoryPressureLevel?) throws -> MonitorReading {
        MonitorReading(
            event: LevelEvent(level: level, previous: previous, source: .usageSample, snapshot: try bench.sampler.sample()),
            rise: nil, releaseLevel: .warning, growthBytesPerSecond: 0, tally: ForecastTally(), readAt: bench.clock.now,
            detectionBound: .milliseconds(10))
    }

    @Test(arguments: [
        (MemoryPressureLevel.critical, MemoryPressureLevel?.some(.critical)),  // held at critical (after an OOM kill)
        (.warning, nil),  // a monitor's first reading
        (.warning, .normal),  // a step up the engine did not count as a rise
    ])
    func aReleaseAtWarningGoesBelowTheRecoveryMarkUnlessTheLevelStayedAtWarning(level: MemoryPressureLevel, previous: MemoryPressureLevel?) throws {
        let (first, overMark) = try Self.firstRequest(atUsage: 0.85) { try Self.repeatAtWarning($0, level: level, previous: previous) }
        #expect(first.targetBytes == overMark(0.70), "to 70 % of the limit: \(first.targetBytes)")
    }

    @Test func aRiseTakesUsageBelowTheRecoveryMark() throws {
        let (first, overMark) = try Self.firstRequest(atUsage: 0.85) { try $0.reading(rise: .warning, releaseLevel: .warning) }
        #expect(first.targetBytes == overMark(0.70), "to 70 % of the limit: \(first.targetBytes)")
    }

    @Test func aReleaseAtCriticalWhileRaisedTakesUsageBelowTheRecoveryMark() throws {
        let (first, overMark) = try Self.firstRequest(atUsage: 0.95) { try $0.reading(rise: nil, releaseLevel: .critical) }
        #expect(first.level == .critical)
        #expect(first.targetBytes == overMark(0.70), "to 70 % of the limit: \(first.targetBytes)")
    }
}

import MemwarnRelease
import MemwarnSystem
import Testing

@testable import MemwarnMonitor

/// The adaptive sampling rule, on its own (no kernel): the wait until usage could reach the next
/// mark, its bounds, the guard bands, and the policy key that sets the worst-case rate.
struct SamplingRuleTests {
    static let mebibyte: UInt64 = 1 << 20
    static let rule = SamplingRule(worstCaseBytesPerSecond: Double(1 << 30), longestInterval: .seconds(1))
    /// A 1 GiB limit on the default policy: warning 80 %, critical 90 %, recovery 70 %.
    static let above: [UInt64] = [819 * mebibyte, 921 * mebibyte, 1024 * mebibyte]
    static let below: [UInt64] = [716 * mebibyte, 819 * mebibyte, 921 * mebibyte]

    static func wait(_ usage: UInt64, rising: Double = 0, falling: Double = 0, rule: SamplingRule = rule) -> Duration {
        rule.interval(usage: usage, marksAbove: above, marksBelow: below, risingBytesPerSecond: rising, fallingBytesPerSecond: falling)
    }

    @Test func theNextReadIsDueWhenUsageGrowingAtTheWorstCaseRateCouldReachTheNextMark() {
        // 100 MiB below the warning mark at 1 GiB/s: 1/10.24 s.
        let wait = Self.wait(719 * Self.mebibyte)
        #expect(abs(wait.seconds - 100.0 / 1024) < 0.000_001, "\(wait)")
        // Past the warning mark, the critical mark is next.
        #expect(abs(Self.wait(871 * Self.mebibyte).seconds - 50.0 / 1024) < 0.000_001)
    }

    @Test func closeToAMarkItReadsAtTheShortestIntervalAndFarBelowAtThePollInterval() {
        #expect(Self.wait(816 * Self.mebibyte) == SamplingRule.shortestInterval, "3 MiB below the mark")
        #expect(abs(Self.wait(0).seconds - 819.0 / 1024) < 0.000_001, "819 MiB below at 1 GiB/s")
        let slow = SamplingRule(worstCaseBytesPerSecond: Double(256 << 20), longestInterval: .seconds(1))
        #expect(Self.wait(0, rule: slow) == .seconds(1), "bounded by the poll interval")
        #expect(Self.wait(1100 * Self.mebibyte) == SamplingRule.shortestInterval, "past the limit: as often as allowed")
    }

    @Test func aMeasuredRiseFasterThanTheWorstCaseShortensTheWait() {
        let measured = Self.wait(719 * Self.mebibyte, rising: Double(4 << 30))
        #expect(abs(measured.seconds - 100.0 / 4096) < 0.000_001, "\(measured)")
        #expect(Self.wait(719 * Self.mebibyte, rising: Double(1 << 20)) == Self.wait(719 * Self.mebibyte), "a slower rise changes nothing")
    }

    @Test func whileUsageFallsTheMarkBelowCountsAtTheMeasuredFall() {
        // 10 MiB above the recovery mark, falling at 1 GiB/s: the recovery mark is nearer in time.
        let wait = Self.wait(726 * Self.mebibyte, falling: Double(1 << 30))
        #expect(abs(wait.seconds - 10.0 / 1024) < 0.000_001, "\(wait)")
        #expect(Self.wait(726 * Self.mebibyte) > wait, "without the fall, the warning mark sets the wait")
    }

    @Test func aWorstCaseOfZeroIsAFixedPoll() {
        let off = SamplingRule(worstCaseBytesPerSecond: 0, longestInterval: .milliseconds(100))
        #expect(!off.isAdaptive)
        for usage: UInt64 in [0, 816 << 20, 2000 << 20] {
            #expect(Self.wait(usage, rising: Double(8 << 30), rule: off) == .milliseconds(100))
        }
    }

    @Test func theGuardBandCoversWhatEveryCPUMayChargeUncheckedTwiceWithinBounds() {
        let gibibyte: UInt64 = 1 << 30
        #expect(SamplingRule.guardBand(capacity: gibibyte, processors: 2) == 2 * 2 * SamplingRule.uncheckedBytesPerProcessor)
        #expect(SamplingRule.guardBand(capacity: gibibyte, processors: 2) == 3 * Self.mebibyte)
        #expect(SamplingRule.guardBand(capacity: 32 * Self.mebibyte, processors: 64) == 32 * Self.mebibyte / 20, "at most 5 % of the limit")
        #expect(SamplingRule.guardBand(capacity: gibibyte, processors: 1) == 3 * Self.mebibyte / 2)
    }

    @Test func insideAGuardBandTheWaitIsTheCapUnlessARiseCouldReachTheMarkSooner() {
        let mebibyte = Self.mebibyte
        #expect(Self.rule.guardInterval(distance: mebibyte, risingBytesPerSecond: 0) == .milliseconds(100), "usage stays put or falls")
        #expect(Self.rule.guardInterval(distance: mebibyte, risingBytesPerSecond: Double(mebibyte)) == .milliseconds(100), "1 s away: the cap")
        #expect(Self.rule.guardInterval(distance: mebibyte, risingBytesPerSecond: Double(100 * mebibyte)) == .milliseconds(10), "10 ms away")
        #expect(Self.rule.guardInterval(distance: mebibyte, risingBytesPerSecond: Double(1 << 30)) == .milliseconds(5), "the floor")
        var off = Self.rule
        off.worstCaseBytesPerSecond = 0
        let rising = Double(100 * mebibyte)
        #expect(off.guardInterval(distance: mebibyte, risingBytesPerSecond: rising) == .milliseconds(10), "adaptive sampling off: the same")
    }

    @Test func thePolicyKeyTakesARatePerSecondOrZero() throws {
        #expect(PressurePolicy().worstCaseGrowthBytesPerSecond == 1 << 30)
        #expect(PressurePolicy.parseGrowthRate("512M/s") == 512 << 20)
        #expect(PressurePolicy.parseGrowthRate("1.5GiB/s") == 3 << 29)
        #expect(PressurePolicy.parseGrowthRate("0") == 0)
        for bad in ["1G", "fast", "/s", "-1M/s", "1G/m"] { #expect(PressurePolicy.parseGrowthRate(bad) == nil, "\(bad)") }
        let policy = try PressurePolicy.load(environment: ["MEMWARN_WORST_CASE_GROWTH": "256M/s"])
        #expect(policy.worstCaseGrowthBytesPerSecond == 256 << 20)
        let error = #expect(throws: PolicyError.self) { try PressurePolicy.load(environment: ["MEMWARN_WORST_CASE_GROWTH": "1K/s"]) }
        #expect(error?.code == .inconsistent && error?.message.contains("worst_case_growth") == true)
        let notARate = #expect(throws: PolicyError.self) { try PressurePolicy.load(environment: ["MEMWARN_WORST_CASE_GROWTH": "fast"]) }
        #expect(notARate?.code == .badValue)
    }

    @Test func policyDurationsPrintAsPolicyFilesWriteThem() {
        #expect(PressurePolicy.formatDuration(.milliseconds(5)) == "5ms")
        #expect(PressurePolicy.formatDuration(.seconds(1)) == "1s")
        #expect(PressurePolicy.formatDuration(.milliseconds(1500)) == "1.5s")
        #expect(PressurePolicy.formatDuration(.microseconds(2500)) == "2.5ms")
    }
}

import CgroupKit
import MemwarnTestKit
import Testing

@testable import MemwarnMonitor
@testable import MemwarnRelease

/// The growth estimate, the forecast rule and the release target: pure logic, on readings made
/// here (the real-cgroup tests are in `ForecastIntegrationTests` and the CLI's `GrowthTests`).
struct GrowthForecastTests {
    static let capacity: UInt64 = 128 << 20
    static let policy = PressurePolicy()

    static func snapshot(usage: Double) -> PressureSnapshot {
        PressureSnapshot(
            time: .zero, cgroup: nil, usageBytes: UInt64(usage), limit: EffectiveLimit(bytes: capacity, file: "memory.limit_in_bytes", cgroupPath: "/t"),
            system: nil, pressure: nil, pressureFile: nil)
    }

    @Test func readingsOnALineGiveItsSlopeWithNoDoubt() throws {
        var estimator = GrowthEstimator(window: .seconds(10))
        for step in 0..<8 { estimator.add(seconds: Double(step) * 0.25, bytes: 50e6 + 4e6 * Double(step) * 0.25, capacityBytes: Double(Self.capacity)) }
        let estimate = try #require(estimator.estimate)
        #expect(abs(estimate.bytesPerSecond - 4e6) < 1)
        #expect(estimate.samples == 8 && estimate.confidence == .infinity && abs(estimate.spanSeconds - 1.75) < 1e-9)
        #expect(estimate.sustainedBytesPerSecond == estimate.bytesPerSecond)
    }

    @Test func aJumpOffTheLineRestartsTheFit() {
        var estimator = GrowthEstimator(window: .seconds(10))
        let capacity = Double(Self.capacity)
        estimator.add(seconds: 0, bytes: 0.02 * capacity, capacityBytes: capacity)
        // The service loads its data: 45 % at once, then climbs 1 % a tenth of a second.
        for step in 0..<6 { estimator.add(seconds: 1 + Double(step) * 0.1, bytes: (0.45 + Double(step) * 0.01) * capacity, capacityBytes: capacity) }
        #expect(estimator.points.count == 6, "the reading before the jump is gone")
        #expect(estimator.points.first?.seconds == 1)
    }

    @Test func aFallBeyondTheToleranceRestartsTheFitAndOldReadingsLeaveTheWindow() {
        var estimator = GrowthEstimator(window: .seconds(2))
        let capacity = Double(Self.capacity)
        for step in 0..<5 { estimator.add(seconds: Double(step) * 0.1, bytes: 60e6 + Double(step) * 1e6, capacityBytes: capacity) }
        estimator.add(seconds: 0.5, bytes: 63.9e6 - 0.11 * capacity, capacityBytes: capacity)
        #expect(estimator.points.count == 1, "a fall of 11 % of the capacity starts anew")
        estimator.add(seconds: 0.6, bytes: estimator.points[0].bytes - 0.05 * capacity, capacityBytes: capacity)
        #expect(estimator.points.count == 2, "a fall within 10 % is noise, kept")
        estimator.add(seconds: 3.0, bytes: 60e6, capacityBytes: capacity)
        #expect(estimator.points.map(\.seconds) == [3.0], "readings older than the window are gone")
        #expect(estimator.estimate == nil, "one reading is no line")
    }

    @Test func aSteadyClimbWarnsBeforeTheWarningMark() throws {
        var estimator = GrowthEstimator(window: Self.policy.growthWindow)
        let capacity = Double(Self.capacity)
        var warnedAt: Double?
        // 2 MiB/s from 55 %, a reading every 5 % crossing plus one a second (as the monitor reads).
        var usage = 0.55 * capacity
        var seconds = 0.0
        while usage < 0.8 * capacity, warnedAt == nil {
            estimator.add(seconds: seconds, bytes: usage, capacityBytes: capacity)
            let snapshot = Self.snapshot(usage: usage)
            if ForecastRule.warns(ForecastRule.forecast(estimator.estimate, snapshot: snapshot, policy: Self.policy), snapshot: snapshot, policy: Self.policy) {
                warnedAt = usage / capacity
            }
            seconds += 1
            usage += 2 * 1_048_576
        }
        let ratio = try #require(warnedAt, "no forecast warning before the warning mark")
        #expect(ratio < 0.8)
    }

    @Test func aFlatLoadWithNoiseAlmostNeverWarnsAndAForecastOffNeverDoes() {
        var generator = SeededGenerator(seed: 11)
        let capacity = Double(Self.capacity)
        var falseWarnings = 0
        var off = Self.policy
        off.forecastHorizon = .zero
        var warnedWithHorizonOff = false
        for _ in 0..<1_000 {
            var estimator = GrowthEstimator(window: Self.policy.growthWindow)
            // 75 % ± 3 % of the limit, a reading a second for ten seconds.
            for second in 0..<10 {
                let usage = (0.75 + Double.random(in: -0.03...0.03, using: &generator)) * capacity
                estimator.add(seconds: Double(second), bytes: usage, capacityBytes: capacity)
            }
            let snapshot = Self.snapshot(usage: 0.75 * capacity)
            let forecast = ForecastRule.forecast(estimator.estimate, snapshot: snapshot, policy: Self.policy)
            if ForecastRule.warns(forecast, snapshot: snapshot, policy: Self.policy) { falseWarnings += 1 }
            if ForecastRule.warns(forecast, snapshot: snapshot, policy: off) { warnedWithHorizonOff = true }
        }
        // A confidence of 5 with 10 readings is passed by chance in about 1 of 2,000 fits.
        #expect(falseWarnings <= 2, "\(falseWarnings) false forecast warnings in 1,000 flat noisy loads")
        #expect(!warnedWithHorizonOff)
    }

    @Test func theTargetIsUsageBackBelowTheRecoveryMarkLessHeadroomForGrowth() {
        let mebibyte = 1_048_576.0
        let snapshot = Self.snapshot(usage: 100 * mebibyte)
        let plain = ReleaseTarget.make(for: snapshot, policy: Self.policy, growthBytesPerSecond: 0, leadTime: .milliseconds(20))
        #expect(plain.bytes == Int(((100 - 0.7 * 128) * mebibyte).rounded(.up)))
        #expect(plain.headroomBytes == 0)
        let growing = ReleaseTarget.make(for: snapshot, policy: Self.policy, growthBytesPerSecond: 100 * mebibyte, leadTime: .milliseconds(20))
        #expect(growing.headroomBytes == Int((2 * mebibyte).rounded(.up)))
        #expect(growing.bytes == plain.bytes + growing.headroomBytes)
        let low = ReleaseTarget.make(
            for: Self.snapshot(usage: 40 * mebibyte), policy: Self.policy, growthBytesPerSecond: 100 * mebibyte, leadTime: .milliseconds(20))
        #expect(low.bytes == 0, "far below the recovery mark, headroom alone asks for nothing")
        let huge = ReleaseTarget.make(for: snapshot, policy: Self.policy, growthBytesPerSecond: 1e12, leadTime: .seconds(1))
        #expect(huge.bytes == Int(100 * mebibyte), "headroom is capped at the recovery mark: at most everything")
        #expect(ReleaseCoordinator.target(for: snapshot, policy: Self.policy) == plain.bytes)
    }

    @Test func theForecastNamesTheTimeToTheCriticalMarkAndTheLimit() throws {
        let estimate = GrowthEstimate(bytesPerSecond: 1_048_576, samples: 6, spanSeconds: 5, confidence: 50)
        let forecast = try #require(ForecastRule.forecast(estimate, snapshot: Self.snapshot(usage: 64 * 1_048_576), policy: Self.policy))
        #expect(abs(forecast.secondsToLimit - 64) < 1e-6)
        #expect(abs(forecast.secondsToCritical - (0.9 * 128 - 64)) < 1e-6)
        #expect(
            ForecastRule.forecast(
                GrowthEstimate(bytesPerSecond: -5, samples: 6, spanSeconds: 5, confidence: -50),
                snapshot: Self.snapshot(usage: 64 * 1_048_576), policy: Self.policy) == nil)
    }
}

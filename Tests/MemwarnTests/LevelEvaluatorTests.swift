import CgroupKit
import Memwarn
import Testing

@testable import MemwarnMonitor

struct LevelEvaluatorTests {
    static let limit: UInt64 = 1000

    static func snapshot(usage: UInt64, someAvg10: Double = 0, fullAvg10: Double = 0) -> PressureSnapshot {
        PressureSnapshot(
            time: .zero, cgroup: nil, usageBytes: usage, limit: EffectiveLimit(bytes: limit, file: "memory.max", cgroupPath: "/"),
            system: nil,
            pressure: PressureStall(some: .init(avg10: someAvg10, avg60: 0, avg300: 0, total: 0), full: .init(avg10: fullAvg10, avg60: 0, avg300: 0, total: 0)),
            pressureFile: nil)
    }

    @Test func marksMapUsageToLevelsAndEscalationIsImmediate() {
        var evaluator = LevelEvaluator(policy: PressurePolicy())
        let now = ContinuousClock.now
        #expect(evaluator.evaluate(Self.snapshot(usage: 790), hint: .normal, now: now).change == nil)
        #expect(evaluator.evaluate(Self.snapshot(usage: 800), hint: .normal, now: now).change == .warning)
        #expect(evaluator.evaluate(Self.snapshot(usage: 900), hint: .normal, now: now).change == .critical)
    }

    @Test func betweenRecoveryAndWarningTheLevelStaysRaised() {
        var policy = PressurePolicy()
        policy.holdTime = .zero
        var evaluator = LevelEvaluator(policy: policy)
        let now = ContinuousClock.now
        _ = evaluator.evaluate(Self.snapshot(usage: 850), hint: .normal, now: now)
        #expect(evaluator.evaluate(Self.snapshot(usage: 750), hint: .normal, now: now).change == nil)
        #expect(evaluator.level == .warning)
        #expect(evaluator.evaluate(Self.snapshot(usage: 699), hint: .normal, now: now).change == .normal)
        // From normal, the same 75 % stays normal: hysteresis.
        #expect(evaluator.evaluate(Self.snapshot(usage: 750), hint: .normal, now: now).change == nil)
        #expect(evaluator.level == .normal)
    }

    @Test func steppingDownWaitsForTheHoldTimeAndARiseCancelsIt() {
        var policy = PressurePolicy()
        policy.holdTime = .seconds(2)
        var evaluator = LevelEvaluator(policy: policy)
        let start = ContinuousClock.now
        _ = evaluator.evaluate(Self.snapshot(usage: 950), hint: .normal, now: start)
        let first = evaluator.evaluate(Self.snapshot(usage: 100), hint: .normal, now: start)
        #expect(first == .init(change: nil, stepDownAt: start + .seconds(2)))
        #expect(evaluator.evaluate(Self.snapshot(usage: 100), hint: .normal, now: start + .seconds(1)).change == nil)
        #expect(evaluator.evaluate(Self.snapshot(usage: 100), hint: .normal, now: start + .seconds(2)).change == .normal)
        _ = evaluator.evaluate(Self.snapshot(usage: 950), hint: .normal, now: start + .seconds(3))
        _ = evaluator.evaluate(Self.snapshot(usage: 100), hint: .normal, now: start + .seconds(3))
        _ = evaluator.evaluate(Self.snapshot(usage: 950), hint: .normal, now: start + .seconds(4))
        #expect(evaluator.evaluate(Self.snapshot(usage: 100), hint: .normal, now: start + .seconds(5)).change == nil, "the rise restarted the hold")
    }

    @Test func pressureStallsAndHintsRaiseTheLevelWhateverTheUsage() {
        let policy = PressurePolicy()
        #expect(
            LevelEvaluator.candidate(for: Self.snapshot(usage: 0, someAvg10: 10), current: .normal, hint: .normal, policy: policy, countsPressureStall: true)
                == .warning)
        #expect(
            LevelEvaluator.candidate(for: Self.snapshot(usage: 0, fullAvg10: 5), current: .normal, hint: .normal, policy: policy, countsPressureStall: true)
                == .critical)
        #expect(
            LevelEvaluator.candidate(for: Self.snapshot(usage: 0), current: .normal, hint: .critical, policy: policy, countsPressureStall: true) == .critical)
        #expect(
            LevelEvaluator.candidate(for: Self.snapshot(usage: 0, someAvg10: 9.99), current: .normal, hint: .normal, policy: policy, countsPressureStall: true)
                == .normal)
    }

    /// `watchesPressureStall = false`: the same stalls leave the level to usage and hints.
    @Test func stallsDoNotCountWhenTheMonitorDoesNotWatchThem() {
        let policy = PressurePolicy()
        var evaluator = LevelEvaluator(policy: policy, countsPressureStall: false)
        #expect(evaluator.evaluate(Self.snapshot(usage: 100, someAvg10: 60, fullAvg10: 40), hint: .normal, now: .now).change == nil)
        #expect(evaluator.level == .normal)
        #expect(
            evaluator.evaluate(Self.snapshot(usage: 850, someAvg10: 60, fullAvg10: 40), hint: .normal, now: .now).change == .warning,
            "usage still counts")
        #expect(
            LevelEvaluator.candidate(for: Self.snapshot(usage: 0, fullAvg10: 40), current: .normal, hint: .critical, policy: policy, countsPressureStall: false)
                == .critical,
            "hints still count")
        let stalled = Self.snapshot(usage: 100, someAvg10: 60, fullAvg10: 40)
        #expect(PressureMonitor.level(of: stalled, policy: policy) == .critical)
        #expect(PressureMonitor.level(of: stalled, policy: policy, countingPressureStall: false) == .normal)
    }

    @Test func withoutALimitTheSystemsMemoryIsTheMeasure() {
        let snapshot = PressureSnapshot(
            time: .zero, cgroup: nil, usageBytes: 85, limit: nil, system: SystemMemory(totalBytes: 100, availableBytes: 15), pressure: nil, pressureFile: nil)
        #expect(snapshot.capacityBytes == 100)
        #expect(LevelEvaluator.candidate(for: snapshot, current: .normal, hint: .normal, policy: PressurePolicy(), countsPressureStall: true) == .warning)
    }
}

import CgroupKit
import MemwarnRelease
import Testing

@testable import MemwarnMonitor

/// The level decided once a reading, on injected instants: marks, hysteresis, hold, step down
/// and its cause, recheck, the forecast's gate, the release level, a carried level. No kernel,
/// no clock, no waiting.
struct LevelMachineTests {
    static let limit: UInt64 = 1000
    /// The instant every test counts from: the machine reads no clock, so any instant will do.
    static let start = ContinuousClock.now

    static func snapshot(usage: UInt64, someAvg10: Double = 0, fullAvg10: Double = 0) -> PressureSnapshot {
        PressureSnapshot(
            time: .zero, cgroup: nil, usageBytes: usage, limit: EffectiveLimit(bytes: limit, file: "memory.max", cgroupPath: "/"),
            system: nil,
            pressure: PressureStall(some: .init(avg10: someAvg10, avg60: 0, avg300: 0, total: 0), full: .init(avg10: fullAvg10, avg60: 0, avg300: 0, total: 0)),
            pressureFile: nil)
    }

    /// One step at `start + seconds`, from a usage sample, woken by `source`.
    static func step(
        _ machine: inout LevelMachine, usage: UInt64, at seconds: Double = 0, hint: MemoryPressureLevel = .normal,
        source: PressureSignal = .usageSample, forecast: PressureForecast? = nil
    ) -> LevelMachine.Decision {
        machine.step(Self.snapshot(usage: usage), hint: hint, source: source, forecast: forecast, now: start + .seconds(seconds))
    }

    @Test func marksMapUsageToLevelsAndEscalationIsImmediate() {
        let decisions = SharedCount()
        var machine = LevelMachine(policy: PressurePolicy(), decisions: decisions)
        #expect(Self.step(&machine, usage: 790).rise == nil)
        let warning = Self.step(&machine, usage: 800)
        #expect(warning.rise == .warning && warning.previous == .normal && warning.cause == .usageSample)
        #expect(Self.step(&machine, usage: 900).rise == .critical)
        #expect(decisions.value == 3, "one decision a reading")
    }

    @Test func betweenRecoveryAndWarningTheLevelStaysRaised() {
        var policy = PressurePolicy()
        policy.holdTime = .zero
        var machine = LevelMachine(policy: policy)
        _ = Self.step(&machine, usage: 850)
        #expect(Self.step(&machine, usage: 750).level == .warning)
        #expect(Self.step(&machine, usage: 699).level == .normal)
        // From normal, the same 75 % stays normal: hysteresis.
        #expect(Self.step(&machine, usage: 750).level == .normal)
    }

    @Test func steppingDownWaitsForTheHoldTimeAndARiseCancelsIt() {
        var policy = PressurePolicy()
        policy.holdTime = .seconds(2)
        var machine = LevelMachine(policy: policy)
        _ = Self.step(&machine, usage: 950)
        let first = Self.step(&machine, usage: 100, source: .memoryEvents)
        #expect(first.level == .critical)
        #expect(
            first.nextReading == .init(at: Self.start + .seconds(2), cause: .memoryEvents), "the hold's end, owed to the signal that first saw the lower level")
        #expect(Self.step(&machine, usage: 100, at: 1).level == .critical)
        let down = Self.step(&machine, usage: 100, at: 2, source: .recheck)
        #expect(down.level == .normal && down.previous == .critical && down.cause == .memoryEvents)
        #expect(down.nextReading == nil, "at normal with nothing pending the level asks for no reading")
        _ = Self.step(&machine, usage: 950, at: 3)
        _ = Self.step(&machine, usage: 100, at: 3)
        _ = Self.step(&machine, usage: 950, at: 4)
        #expect(Self.step(&machine, usage: 100, at: 5).level == .critical, "the rise restarted the hold")
    }

    @Test func whileRaisedTheLevelAsksForARecheckFromEachReading() {
        var policy = PressurePolicy()
        policy.recheckInterval = .milliseconds(750)
        var machine = LevelMachine(policy: policy)
        #expect(Self.step(&machine, usage: 500).nextReading == nil)
        #expect(Self.step(&machine, usage: 850, at: 1).nextReading == .init(at: Self.start + .milliseconds(1750), cause: .recheck))
        #expect(
            Self.step(&machine, usage: 860, at: 1.5).nextReading == .init(at: Self.start + .milliseconds(2250), cause: .recheck), "pushed on by each reading")
    }

    @Test func theReleaseLevelIsDecidedWithTheLevel() {
        var policy = PressurePolicy()
        policy.holdTime = .seconds(2)
        var machine = LevelMachine(policy: policy)
        #expect(Self.step(&machine, usage: 500).releaseLevel == nil, "normal: no release")
        #expect(Self.step(&machine, usage: 950).releaseLevel == .critical, "a rise releases at its level")
        // Held at critical while usage is at the warning mark: released at what usage asks for.
        #expect(Self.step(&machine, usage: 820, at: 0.5).releaseLevel == .warning)
        // Held, usage below the warning mark: nothing to release.
        #expect(Self.step(&machine, usage: 750, at: 1).releaseLevel == nil)
        // A stall asks for critical without hysteresis; never above the level.
        var stalled = Self.snapshot(usage: 820, fullAvg10: 50)
        #expect(machine.step(stalled, hint: .normal, source: .psiTrigger, forecast: nil, now: Self.start + .seconds(1.2)).releaseLevel == .critical)
        machine = LevelMachine(policy: policy, countsPressureStall: false, level: .warning)
        stalled = Self.snapshot(usage: 950, fullAvg10: 50)
        #expect(machine.step(stalled, hint: .normal, source: .usageSample, forecast: nil, now: Self.start).releaseLevel == .critical, "a rise")
    }

    @Test func aTrustedForecastRaisesWarningOnlyWhereNothingElseDoes() {
        var policy = PressurePolicy()
        policy.forecastHorizon = .seconds(30)
        let growth = GrowthEstimate(bytesPerSecond: 20, samples: 10, spanSeconds: 3, confidence: 50)
        let trusted = PressureForecast(growth: growth, secondsToCritical: 10, secondsToLimit: 15)
        let far = PressureForecast(growth: growth, secondsToCritical: 60, secondsToLimit: 70)
        var machine = LevelMachine(policy: policy)
        #expect(Self.step(&machine, usage: 700, forecast: far).level == .normal, "beyond the horizon")
        let raised = Self.step(&machine, usage: 700, at: 1, forecast: trusted)
        #expect(raised.rise == .warning && raised.cause == .forecast && raised.forecastRaised)
        #expect(Self.step(&machine, usage: 400, at: 1.5, forecast: trusted).level == .warning, "below half the capacity it does not warn, and the hold holds")
        var critical = LevelMachine(policy: policy)
        let byUsage = Self.step(&critical, usage: 900, forecast: trusted)
        #expect(byUsage.rise == .critical && byUsage.cause == .usageSample && !byUsage.forecastRaised, "usage asked for more")
    }

    @Test func aMonitorsFirstReadingIsNoRiseAndACarriedLevelIs() {
        var first = LevelMachine(policy: PressurePolicy())
        let initial = first.start(Self.snapshot(usage: 950), carried: nil, now: Self.start)
        #expect(initial.previous == nil && initial.rise == nil && initial.level == .critical && initial.cause == .initial)
        #expect(initial.releaseLevel == .critical, "a first reading at the critical mark releases")
        var carried = LevelMachine(policy: PressurePolicy(), level: .warning)
        let moved = carried.start(Self.snapshot(usage: 950), carried: .warning, now: Self.start)
        #expect(moved.previous == .warning && moved.rise == .critical && moved.cause == .policyChange)
        var held = LevelMachine(policy: PressurePolicy(), level: .critical)
        let kept = held.start(Self.snapshot(usage: 100), carried: .critical, now: Self.start)
        #expect(kept.level == .critical && kept.rise == nil, "the level carries over; the step down holds from the new marks")
        #expect(kept.nextReading == .init(at: Self.start + PressurePolicy().holdTime, cause: .policyChange))
        // Read again by a recheck just before the hold's end: still held.
        let early = held.step(
            Self.snapshot(usage: 100), hint: .normal, source: .recheck, forecast: nil, now: Self.start + PressurePolicy().holdTime - .milliseconds(1))
        #expect(early.level == .critical, "held until the hold's end")
        // Whatever signal reads it at the hold's end, the step down is the policy's doing.
        let down = held.step(Self.snapshot(usage: 100), hint: .normal, source: .recheck, forecast: nil, now: Self.start + PressurePolicy().holdTime)
        #expect(down.level == .normal && down.previous == .critical && down.cause == .policyChange, "the step down at the new marks: \(down.cause)")
    }

    @Test func pressureStallsAndHintsRaiseTheLevelWhateverTheUsage() {
        let policy = PressurePolicy()
        func asked(_ snapshot: PressureSnapshot) -> MemoryPressureLevel {
            LevelMachine.asked(by: snapshot, policy: policy, countsPressureStall: true).level
        }
        #expect(asked(Self.snapshot(usage: 0, someAvg10: 10)) == .warning)
        #expect(asked(Self.snapshot(usage: 0, fullAvg10: 5)) == .critical)
        #expect(asked(Self.snapshot(usage: 0, someAvg10: 9.99)) == .normal)
        var machine = LevelMachine(policy: policy)
        #expect(Self.step(&machine, usage: 0, hint: .critical, source: .oom).rise == .critical)
    }

    /// `watchesPressureStall = false`: the same stalls leave the level to usage and hints.
    @Test func stallsDoNotCountWhenTheMonitorDoesNotWatchThem() {
        let policy = PressurePolicy()
        var machine = LevelMachine(policy: policy, countsPressureStall: false)
        let stalled = Self.snapshot(usage: 100, someAvg10: 60, fullAvg10: 40)
        #expect(machine.step(stalled, hint: .normal, source: .psiTrigger, forecast: nil, now: Self.start).level == .normal)
        let used = Self.snapshot(usage: 850, someAvg10: 60, fullAvg10: 40)
        #expect(machine.step(used, hint: .normal, source: .usageSample, forecast: nil, now: Self.start).rise == .warning, "usage still counts")
        #expect(machine.step(stalled, hint: .critical, source: .oom, forecast: nil, now: Self.start).rise == .critical, "hints still count")
        #expect(PressureMonitor.level(of: stalled, policy: policy) == .critical)
        #expect(PressureMonitor.level(of: stalled, policy: policy, countingPressureStall: false) == .normal)
    }

    @Test func withoutALimitTheSystemsMemoryIsTheMeasure() {
        let snapshot = PressureSnapshot(
            time: .zero, cgroup: nil, usageBytes: 85, limit: nil, system: SystemMemory(totalBytes: 100, availableBytes: 15), pressure: nil, pressureFile: nil)
        #expect(snapshot.capacityBytes == 100)
        #expect(LevelMachine.asked(by: snapshot, policy: PressurePolicy(), countsPressureStall: true).level == .warning)
    }
}

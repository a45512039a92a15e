import CgroupKit
import MemwarnRelease
import MemwarnTestFixtures
import MemwarnTestKit
import Testing

@testable import MemwarnMonitor

/// The level logic's scenarios on a synthetic host of any layout (v2, v1, hybrid, a container's
/// view): each host kind's suite supplies its monitor's event stream and how to write usage.
enum SyntheticLevelScenarios {
    /// A monitor reading a synthetic host's `files`, without PSI (a trigger needs the kernel).
    static func monitor(files: KernelFiles, policy: PressurePolicy = PressurePolicy()) -> PressureMonitor {
        var configuration = MonitorConfiguration(policy: policy, environment: [:])
        configuration.files = files
        configuration.watchesPressureStall = false
        return PressureMonitor(configuration: configuration, logger: testLogger)
    }

    /// Usage written past the warning and then the critical mark is found, each by sampling.
    static func climbFindsBothMarks(
        _ iterator: inout AsyncStream<LevelEvent>.Iterator, setUsage: (Double) throws -> Void
    ) async throws {
        for (fraction, level) in [(0.85, MemoryPressureLevel.warning), (0.95, .critical)] {
            try setUsage(fraction)
            let event = try await next(&iterator, within: .seconds(5))
            #expect(event.level == level && event.source == .usageSample, "\(event.level) from \(event.source)")
        }
    }

    /// Between the recovery and the warning marks the level holds (hysteresis); below the
    /// recovery mark it steps down only once the lower level has held for the policy's hold time,
    /// and then straight to what the reading says. Starts at normal; on the engine's manual clock
    /// (moved 5 ms a step), so each step down is timed exactly: at the hold's end, not a step late.
    static func fallStepsDownOnlyBelowTheRecoveryMarkAndAfterTheHoldTime(
        _ engine: DrivenEngine, holdTime: Duration, setUsage: (Double) throws -> Void
    ) throws {
        let step = Duration.milliseconds(5)
        try setUsage(0.95)
        try engine.advance(until: { engine.level == .critical }, step: step, "critical")
        // 0.75: under the warning mark (0.80) but above the recovery mark (0.70): it holds.
        try setUsage(0.75)
        let held = try stepDown(engine, to: .warning, step: step)
        #expect(held.event.previous == .critical, "from critical, a reading under the critical mark steps to warning, not lower")
        #expect(held.after >= holdTime && held.after <= holdTime + step, "stepped down \(held.after) after the lower level was first read, hold \(holdTime)")
        // 0.5: below the recovery mark: normal, once it has held.
        try setUsage(0.5)
        let normal = try stepDown(engine, to: .normal, step: step)
        #expect(normal.event.previous == .warning, "\(normal.event.level) after \(String(describing: normal.event.previous))")
        #expect(
            normal.after >= holdTime && normal.after <= holdTime + step, "stepped down \(normal.after) after the lower level was first read, hold \(holdTime)")
    }

    /// Moves the clock until the level is `level`: the event, and how long after the first
    /// reading that asked for less the step down came.
    private static func stepDown(_ engine: DrivenEngine, to level: MemoryPressureLevel, step: Duration) throws -> (event: LevelEvent, after: Duration) {
        let before = engine.readings.count
        try engine.advance(until: { engine.level == level }, step: step, "\(level)")
        let readings = engine.readings[before...]
        let first = try #require(readings.first, "a reading of the lower usage")
        let stepped = try #require(readings.last)
        #expect(readings.dropLast().allSatisfy { $0.event.level == first.event.level }, "the level held until the hold ended")
        return (stepped.event, stepped.readAt - first.readAt)
    }
}

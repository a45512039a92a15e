import CgroupKit
import Memwarn
import MemwarnTestKit
import Testing

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
    /// recovery mark it steps down only once the lower level has held for `holdTime`, and then
    /// straight to what the reading says. Starts at normal.
    static func fallStepsDownOnlyBelowTheRecoveryMarkAndAfterTheHoldTime(
        _ iterator: inout AsyncStream<LevelEvent>.Iterator, holdTime: Duration, setUsage: (Double) throws -> Void
    ) async throws {
        try setUsage(0.95)
        let critical = try await next(&iterator, within: .seconds(5))
        #expect(critical.level == .critical, "\(critical.level) from \(critical.source)")
        // 0.75: under the warning mark (0.80) but above the recovery mark (0.70): it holds.
        try setUsage(0.75)
        let held = try await next(&iterator, within: .seconds(5))
        #expect(held.level == .warning, "from critical, a reading under the critical mark steps to warning, not lower: \(held.level)")
        #expect(held.snapshot.time - critical.snapshot.time >= holdTime, "stepped down before the hold time")
        // 0.5: below the recovery mark: normal, once it has held.
        try setUsage(0.5)
        let normal = try await next(&iterator, within: .seconds(5))
        #expect(normal.level == .normal && normal.previous == .warning, "\(normal.level) after \(String(describing: normal.previous))")
        #expect(normal.snapshot.time - held.snapshot.time >= holdTime, "stepped down before the hold time")
    }
}

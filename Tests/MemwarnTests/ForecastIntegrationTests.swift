import CgroupKit
import Foundation
import Memwarn
import MemwarnSystem
import MemwarnTestKit
import MemwarnTestTraits
import Testing

@testable import MemwarnMonitor

/// The forecast on a real cgroup v1 memory cgroup with a real child process: a steady climb is
/// warned of before the warning mark; a flat load with noise is not.
@Suite(.serialized, .tags(.root, .cgroupV1), .needsRealCgroups)
struct ForecastIntegrationTests {
    static let limit: UInt64 = 64 << 20

    /// A hog in the cgroup, the bytes the cgroup holds besides its memory, and a monitor of the
    /// cgroup on the default policy (usage signals only: no PSI, no control endpoint).
    static func watchedHog(in cgroup: TestCgroup) throws -> (hog: MemoryHog, overhead: Int, monitor: PressureMonitor) {
        let hog = try MemoryHog()
        do {
            try cgroup.add(pid: hog.pid)
            var configuration = MonitorConfiguration(cgroupPath: cgroup.location.directory)
            configuration.watchesPressureStall = false
            return (hog, Int(try cgroup.usage()), PressureMonitor(configuration: configuration, logger: testLogger))
        } catch {
            hog.terminate()
            throw error
        }
    }

    @Test func aSteadyClimbRaisesAForecastWarningBeforeTheWarningMark() async throws {
        try await withTestCgroup(limit: Self.limit) { cgroup in
            let (hog, overhead, monitor) = try Self.watchedHog(in: cgroup)
            defer { hog.terminate() }
            let rise = try await withRunningMonitor(monitor) { iterator in
                _ = try await next(&iterator)  // the initial reading
                // About 6.4 MiB/s: 1 % of the limit every 100 ms, from 45 % up to 88 %, paced on a
                // thread of its own (the hog's replies block; a task doing it would hold one of the
                // few threads the monitor's events and other suites need).
                let stopped = Locked(false)
                Thread.detachNewThread {
                    for step in 45...88 where !stopped.withLock({ $0 }) {
                        _ = try? hog.hold(Double(step) / 100, of: cgroup, besides: overhead)
                        usleep(100_000)
                    }
                }
                defer { stopped.withLock { $0 = true } }
                return try await next(&iterator)
            }
            #expect(
                rise.level == .warning && rise.source == .forecast,
                "the first rise came from \(rise.source); forecast then: \(String(describing: rise.forecast))")
            #expect(rise.snapshot.ratio < 0.8, "the forecast warned at \(rise.snapshot.ratio), not before the mark")
            let forecast = try #require(rise.forecast)
            #expect(forecast.secondsToLimit > 0 && forecast.secondsToCritical <= PressurePolicy().forecastHorizon.seconds)
            #expect(monitor.forecastTally.raised == 1)
        }
    }

    @Test func aFlatLoadWithNoiseRaisesNoForecast() async throws {
        try await withTestCgroup(limit: Self.limit) { cgroup in
            let (hog, overhead, monitor) = try Self.watchedHog(in: cgroup)
            defer { hog.terminate() }
            var generator = SeededGenerator(seed: 7)
            let events = try await withRunningMonitor(monitor) { iterator in
                _ = try await next(&iterator)
                // 72 % ± 4 % for 8 s, a new value every 100 ms: across the 70 % and 75 % thresholds.
                for _ in 0..<80 {
                    try hog.hold(0.72 + Double.random(in: -0.04...0.04, using: &generator), of: cgroup, besides: overhead)
                    try await Task.sleep(for: .milliseconds(100))
                }
                return monitor.forecastTally
            }
            // The rule's false-alarm rate on flat noise is pinned with injected time in
            // GrowthForecastTests (at most 2 in 1,000 fits). Here, on real readings at the machine's
            // pace, what must hold is that noise around 72 % never grows into a run of warnings or
            // a critical level: one chance warning in 80 steps was seen once on a loaded CI machine.
            #expect(events.raised <= 1, "a flat load raised \(events.raised) forecast warnings")
            #expect(monitor.level != .critical)
        }
    }
}

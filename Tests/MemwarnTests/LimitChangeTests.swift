import CgroupKit
import Memwarn
import MemwarnSystem
import MemwarnTestKit
import MemwarnTestTraits
import Testing

@testable import MemwarnMonitor

#if canImport(Glibc)
import Glibc
#endif

/// Issue 28, item 3: a limit changed at run time (`systemctl set-property`, an in-place pod
/// resize). The v1 usage thresholds were fixed in bytes of the starting limit and never planned
/// again: after a cut from 1 GiB to 100 MiB, usage at 85 % of the new limit gave no warning, and
/// a climb to 95 % gave `critical` first, as the OOM killer would. Now the limit files are
/// watched (inotify), the write wakes the monitor, and the thresholds follow the new limit.
@Suite(.serialized, .tags(.root, .cgroupV1), .needsRealCgroups)
struct LimitChangeTests {
    static let starting: UInt64 = 1 << 30
    static let lowered: UInt64 = 100 << 20

    @Test(.timeLimit(.minutes(2))) func aLoweredLimitIsHeardAtOnceAndItsThresholdsReplaceTheOldOnes() async throws {
        try await withTestCgroup(limit: Self.starting) { cgroup in
            let hog = try MemoryHog(in: cgroup)
            defer { hog.terminate() }
            let monitor = PressureMonitor(configuration: Self.configuration(cgroup), logger: testLogger)
            try await withRunningMonitor(monitor) { iterator in
                #expect(try await next(&iterator).level == .normal)
                #expect(
                    monitor.watchedSources.contains { $0.hasPrefix("inotify limits: ") && $0.contains(cgroup.location.file("memory.limit_in_bytes")) },
                    "\(monitor.watchedSources)")
                try await waitForUsageThresholds(monitor)
                // 85 % of the new limit: far below every mark of the old one.
                try await hog.hold(0.85, of: Int(Self.lowered))
                try await Task.sleep(for: .milliseconds(200))
                #expect(monitor.level == .normal, "85 MiB of 1 GiB")

                try cgroup.set("memory.limit_in_bytes", to: String(Self.lowered))
                let warning = try await next(&iterator)
                #expect(warning.level == .warning, "\(warning)")
                #expect(warning.source == .limitChange, "the write itself woke the monitor: \(warning)")
                #expect(warning.snapshot.limit?.bytes == Self.lowered)

                // The thresholds of the new limit, registered in place of the old ones.
                try await waitUntil(within: .seconds(10)) {
                    monitor.usageWatch == .thresholds && monitor.watchedSources.contains { $0.contains("% of \(Self.lowered))") }
                }
                let thresholds = monitor.watchedSources.filter { $0.hasPrefix("usage-threshold") || $0.hasPrefix("usage-guard") }
                let expected = expectedUsageThresholds(limit: Self.lowered)
                #expect(thresholds.count == expected.thresholds.union(expected.guards).count, "\(thresholds)")
                #expect(!thresholds.contains { $0.contains("of \(Self.starting))") }, "the old limit's thresholds are gone: \(thresholds)")
            }
        }
    }

    @Test(.timeLimit(.minutes(2))) func aClimbUnderALoweredLimitIsWarnedBeforeItIsCritical() async throws {
        try await withTestCgroup(limit: Self.starting) { cgroup in
            let hog = try MemoryHog(in: cgroup)
            defer { hog.terminate() }
            let monitor = PressureMonitor(configuration: Self.configuration(cgroup), logger: testLogger)
            let seen = Locked<[LevelEvent]>([])
            monitor.addObserver { event in seen.withLock { $0.append(event) } }
            try await withRunningMonitor(monitor) { iterator in
                _ = try await next(&iterator)
                try await waitForUsageThresholds(monitor)
                try await hog.hold(0.5, of: Int(Self.lowered))
                try cgroup.set("memory.limit_in_bytes", to: String(Self.lowered))
                try await waitUntil(within: .seconds(10)) {
                    monitor.usageWatch == .thresholds && monitor.watchedSources.contains { $0.contains("% of \(Self.lowered))") }
                }
                // From half the new limit to 95 % in steps of 5 %, over about 4.5 s.
                for percent in stride(from: 55, through: 95, by: 5) {
                    try await hog.hold(Double(percent) / 100, of: Int(Self.lowered))
                    try await Task.sleep(for: .milliseconds(500))
                }
                try await waitUntil(within: .seconds(10)) { monitor.level == .critical }
            }
            let raised = seen.withLock { $0 }.filter { $0.level > .normal }
            #expect(raised.first?.level == .warning, "\(raised.map { "\($0.level) \($0.source)" })")
            #expect(raised.contains { $0.level == .critical && $0.snapshot.limit?.bytes == Self.lowered })
        }
    }

    private static func configuration(_ cgroup: TestCgroup) -> MonitorConfiguration {
        var configuration = MonitorConfiguration(cgroupPath: cgroup.location.directory, environment: [:])
        configuration.watchesPressureStall = false
        return configuration
    }
}

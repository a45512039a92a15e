import CgroupKit
import MemwarnRelease
import MemwarnSystem
import MemwarnTestKit
import MemwarnTestTraits
import Testing

@testable import MemwarnMonitor

#if canImport(Glibc)
import Glibc
#endif

/// A limit changed at run time (`systemctl set-property`, an in-place pod
/// resize). The v1 usage thresholds were fixed in bytes of the starting limit and never planned
/// again: after a cut from 1 GiB to 100 MiB, usage at 85 % of the new limit gave no warning, and
/// a climb to 95 % gave `critical` first, as the OOM killer would. Now the limit files are
/// watched (inotify), the write wakes the monitor, and the thresholds follow the new limit.
@Suite(.serialized, .tags(.root, .cgroupV1), .needsRealCgroups)
struct LimitChangeTests {
    static let starting: UInt64 = 1 << 30
    static let lowered: UInt64 = 100 << 20

    /// Driven on a manual clock: the engine reads only what the kernel reports and what falls
    /// due as the test moves the clock.
    @Test(.timeLimit(.minutes(2))) func aLoweredLimitIsHeardAtOnceAndItsThresholdsReplaceTheOldOnes() async throws {
        try await withTestCgroup(limit: Self.starting) { cgroup in
            let hog = try MemoryHog(in: cgroup)
            defer { hog.terminate() }
            let engine = try DrivenEngine(files: .host, cgroupPath: cgroup.location.directory)
            try engine.start()
            #expect(engine.events.map(\.level) == [.normal])
            #expect(
                engine.sources.contains { $0.hasPrefix("inotify limits: ") && $0.contains(cgroup.location.file("memory.limit_in_bytes")) },
                "\(engine.sources)")
            try engine.turn(until: { engine.usageWatch == .thresholds }, "the usage thresholds registered")
            // 85 % of the new limit: far below every mark of the old one, for a second of the clock.
            try await hog.hold(0.85, of: Int(Self.lowered))
            for _ in 0..<10 { try engine.advance(by: .milliseconds(100)) }
            #expect(engine.level == .normal, "85 MiB of 1 GiB")

            try cgroup.set("memory.limit_in_bytes", to: String(Self.lowered))
            // kernfs tells inotify from a work queue: a moment after the write.
            try engine.turn(until: { engine.level == .warning }, "the warning")
            let warning = try #require(engine.events.last)
            #expect(warning.level == .warning, "\(warning)")
            #expect(warning.source == .limitChange, "the write itself woke the monitor: \(warning)")
            #expect(warning.snapshot.limit?.bytes == Self.lowered)

            // The thresholds of the new limit, registered in place of the old ones.
            try engine.turn(
                until: { engine.usageWatch == .thresholds && engine.sources.contains { $0.contains("% of \(Self.lowered))") } },
                "the new limit's thresholds registered")
            let thresholds = engine.sources.filter { $0.hasPrefix("usage-threshold") || $0.hasPrefix("usage-guard") }
            let expected = expectedUsageThresholds(limit: Self.lowered)
            #expect(thresholds.count == expected.thresholds.union(expected.guards).count, "\(thresholds)")
            #expect(!thresholds.contains { $0.contains("of \(Self.starting))") }, "the old limit's thresholds are gone: \(thresholds)")
        }
    }

    /// From half the new limit to 95 % in steps of 5 %, half a second of the clock each.
    @Test(.timeLimit(.minutes(2))) func aClimbUnderALoweredLimitIsWarnedBeforeItIsCritical() async throws {
        try await withTestCgroup(limit: Self.starting) { cgroup in
            let hog = try MemoryHog(in: cgroup)
            defer { hog.terminate() }
            let engine = try DrivenEngine(files: .host, cgroupPath: cgroup.location.directory)
            try engine.start()
            try engine.turn(until: { engine.usageWatch == .thresholds }, "the usage thresholds registered")
            try await hog.hold(0.5, of: Int(Self.lowered))
            try cgroup.set("memory.limit_in_bytes", to: String(Self.lowered))
            try engine.turn(
                until: { engine.usageWatch == .thresholds && engine.sources.contains { $0.contains("% of \(Self.lowered))") } },
                "the new limit's thresholds registered")
            for percent in stride(from: 55, through: 95, by: 5) {
                try await hog.hold(Double(percent) / 100, of: Int(Self.lowered))
                for _ in 0..<5 { try engine.advance(by: .milliseconds(100)) }
            }
            #expect(engine.level == .critical, "\(engine.events.map { "\($0.level) \($0.source)" })")
            let raised = engine.events.filter { $0.level > .normal }
            #expect(raised.first?.level == .warning, "\(raised.map { "\($0.level) \($0.source)" })")
            #expect(raised.contains { $0.level == .critical && $0.snapshot.limit?.bytes == Self.lowered })
        }
    }
}

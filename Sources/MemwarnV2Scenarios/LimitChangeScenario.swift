import MemwarnMonitor
import MemwarnTestKit

/// A limit lowered at run time, on cgroup v2: `memory.max` cut from 1 GiB to
/// 100 MiB under 85 MiB of usage, as `systemctl set-property` or an in-place pod resize writes
/// it. Polling is pushed out to 60 s and usage sits far below every mark of the old limit, so
/// only the write itself — inotify on `memory.max` — can wake the monitor in time: the warning
/// must come from `limit-change`, against the new limit. Then the limit is raised back, and the
/// way down to normal follows the new marks.
enum LimitChangeScenario {
    static let scenario = Scenario(name: "limit-change", timeLimit: .seconds(120), body: run)

    static func run(_ context: ScenarioContext) async throws {
        let cgroup = try context.makeCgroup(memoryMax: 1024 * mebibyte)
        let hog = try MemoryHog(in: cgroup, binary: context.products.hog)
        let recording = MonitorRecording(
            context, watching: cgroup, policy: .scenario(pollInterval: .seconds(60), holdTime: .zero),
            watchesPressureStall: false)
        let initial = try await recording.start()
        try expect(
            recording.monitor.watchedSources.contains { $0.hasPrefix("inotify limits: ") && $0.contains("memory.max") },
            "the limit files are not watched: \(recording.monitor.watchedSources)")
        try await hog.hold(0.85, of: 100 * mebibyte)
        try await Task.sleep(for: .milliseconds(500))
        try expect(recording.count == 1, "85 MiB of 1 GiB changed the level: \(recording.events.map(\.summary)) (initial \(initial.summary))")

        try cgroup.set("memory.max", to: String(100 * mebibyte))
        let warning = try await recording.event(number: 1, within: .seconds(10))
        try expect(
            warning.level == .warning && warning.source == .limitChange && warning.snapshot.limit?.bytes == UInt64(100 * mebibyte),
            "after the cut: \(warning.summary), limit \(String(describing: warning.snapshot.limit))")
        context.note("memory.max cut to 100 MiB under 85 MiB: \(warning.summary)")

        try cgroup.set("memory.max", to: String(1024 * mebibyte))
        let normal = try await recording.firstEvent(at: .normal, after: 2, within: .seconds(10))
        context.note("memory.max raised back to 1 GiB: \(normal.summary)")
    }
}

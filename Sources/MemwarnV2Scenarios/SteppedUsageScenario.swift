import MemwarnMonitor
import MemwarnRelease

/// Stepped usage under a plain `memory.max`: 60 %, 85 %, 95 %, then 0 % of 64 MiB give warning,
/// critical and normal. cgroup v2 has no usage thresholds, so these changes are found by
/// sampling `memory.current` — the poll every `poll_interval`, or once raised the re-check
/// every `recheck_interval` (asserted: what is true on v2, not event-driven); the monitor
/// also lists its event sources — inotify on `memory.events` and PSI triggers with a sub-2 s
/// window (root in the VM has CAP_SYS_RESOURCE, so 500 ms is not rounded up to 2 s).
enum SteppedUsageScenario {
    static let scenario = Scenario(name: "stepped-usage-max-polled", timeLimit: .seconds(180), body: run)

    static func run(_ context: ScenarioContext) async throws {
        let (cgroup, hog) = try context.cgroupWithHog(memoryMax: hogCgroupLimit)
        let policy = PressurePolicy.scenario(pollInterval: .milliseconds(250), holdTime: .milliseconds(500))
        let recording = MonitorRecording(context, watching: cgroup, policy: policy)
        let initial = try await recording.start()
        try expect(
            initial.level == .normal && initial.snapshot.limit?.bytes == UInt64(hogCgroupLimit) && initial.snapshot.limit?.file == "memory.max",
            "initial event \(initial.summary), limit \(String(describing: initial.snapshot.limit))")

        let sources = recording.monitor.watchedSources
        context.note("sources: " + sources.joined(separator: " | "))
        try expect(
            sources.contains { $0.hasPrefix("sample \(cgroup.location.file("memory.current")) adaptively") },
            "memory.current is not sampled adaptively: \(sources)")
        try expect(sources.contains("inotify \(cgroup.location.file("memory.events"))"), "no inotify watch on memory.events: \(sources)")
        for trigger in ["some 50000us/500000us", "full 25000us/500000us"] {
            try expect(
                sources.contains("psi-trigger \(trigger) on \(cgroup.location.file("memory.pressure"))"),
                "no PSI trigger \(trigger) (a 500 ms window, unrounded) on the cgroup's memory.pressure: \(sources)")
        }

        let quiet = recording.count
        try await hog.hold(0.60, of: hogCgroupLimit)
        try await Task.sleep(for: .seconds(1))
        try expect(recording.count == quiet, "at 60% the level changed: \(recording.events.map(\.summary))")

        var changes: [LevelEvent] = []
        for (fraction, level) in [(0.85, MemoryPressureLevel.warning), (0.95, .critical), (0.0, .normal)] {
            let number = recording.count
            try await hog.hold(fraction, of: hogCgroupLimit)
            let held = ContinuousClock.now
            let recorded = try await recording.recordedEvent(number: number, within: .seconds(15))
            try expect(recorded.event.level == level, "at \(Int(fraction * 100))% expected \(level), got \(recorded.event.summary)")
            changes.append(recorded.event)
            context.note("\(Int(fraction * 100))%: \(recorded.event.summary), \((recorded.arrival - held).wholeMilliseconds) ms after the step")
        }
        let (warning, critical, normal) = (changes[0], changes[1], changes[2])
        try expect(
            (0.8..<0.9).contains(warning.snapshot.ratio) && critical.snapshot.ratio >= 0.9 && normal.snapshot.ratio < 0.7,
            "ratios \(changes.map(\.snapshot.ratio))")
        // cgroup v2 has no usage event: every change is found by sampling memory.current (a
        // crossing seen by adaptive sampling, the full reading every poll_interval) or, once
        // raised, the re-check (every recheck_interval).
        for change in changes {
            try expect([.usageSample, .poll, .recheck].contains(change.source), "\(change.summary): v2 usage should be found by sampling")
        }
        try expect(recording.count == 4, "extra events: \(recording.events.map(\.summary))")
        await hog.stop()
    }
}

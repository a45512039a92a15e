import MemwarnMonitor

/// An OOM kill reported as critical: a hog asks for twice its cgroup's 64 MiB `memory.max`.
/// Usage-based critical is turned off (critical mark above 1) and the full reading pushed out, so
/// only `memory.events` (`max` on the way, then `oom` and `oom_kill`) can raise critical. The
/// warning mark (99 %) may be found first by adaptive sampling, which reads every 5 ms that close
/// to it.
enum OOMKillScenario {
    static let scenario = Scenario(name: "oom-kill-critical", timeLimit: .seconds(180), body: run)

    static func run(_ context: ScenarioContext) async throws {
        let (cgroup, hog) = try context.cgroupWithHog(memoryMax: hogCgroupLimit)
        var policy = PressurePolicy.scenario(pollInterval: .seconds(60), holdTime: .seconds(30))
        policy.recoveryRatio = 0.98
        policy.warningRatio = 0.99
        policy.criticalRatio = 1.5
        let recording = MonitorRecording(context, watching: cgroup, policy: policy, watchesPressureStall: false)
        let initial = try await recording.start()
        try expect(initial.level == .normal, "initial event \(initial.summary)")

        try hog.startHolding(2 * hogCgroupLimit)
        let status = try await hog.exitStatus(within: .seconds(120))
        try expect(status == 128 + 9, "the hog ended with \(status), expected 137 (SIGKILL by the OOM killer)")
        let critical = try await recording.firstEvent(at: .critical, after: 1, within: .seconds(15))
        context.note("events: " + recording.events.dropFirst().map(\.summary).joined(separator: ", "))
        try expect(critical.source == .oom || critical.source == .memoryEvents, "critical came from \(critical.source)")
        for event in recording.events.dropFirst() {
            try expect(
                event.source.isEventDriven || (event.level == .warning && event.source == .usageSample),
                "\(event.summary) was neither event-driven nor the warning mark found by sampling")
        }
        let counters = try cgroup.reader.events()
        try expect(counters.oomKill == 1, "memory.events oom_kill is \(counters.oomKill), expected 1")
        context.note("memory.events max \(counters.max), oom \(counters.oom), oom_kill \(counters.oomKill)")
    }
}

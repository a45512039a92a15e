import MemwarnMonitor
import MemwarnTestKit

/// `memory.high` throttling reported as pressure, from event-driven sources only: a hog in a
/// child with `memory.high` = 32 MiB, a monitor on the parent (`memory.max` 256 MiB, so usage
/// stays far below its marks) whose polling is pushed out to 60 s. Below `memory.high` nothing
/// happens; 2 MiB over it the kernel throttles the hog: the parent's `memory.events` `high`
/// grows (inotify: warning) and its `memory.pressure` shows stalls (PSI triggers with a 500 ms
/// window; the hog is alone, so its stalls are full ones: critical).
/// A second monitor on the throttled cgroup itself measures against its `memory.high` (its
/// effective limit) and is raised by the same events, or first by adaptive sampling (its usage
/// sits at that limit, where it reads every 5 ms). When the hog lets go, the way back to
/// normal is found by the re-check while raised (v2 has no event for usage falling).
enum HighThrottlingScenario {
    static let scenario = Scenario(name: "high-throttling-events", timeLimit: .seconds(240), body: run)
    static let high = 32 * mebibyte

    static func run(_ context: ScenarioContext) async throws {
        let parent = try context.makeCgroup(memoryMax: 256 * mebibyte)
        let throttled = try parent.child("throttled", settings: [("memory.high", "\(high)")])
        let hog = try MemoryHog(in: throttled, binary: context.products.hog)
        // The hold time stays above the PSI window: a trigger fires at most once a window, so a
        // shorter hold could step down between two firings of an ongoing stall.
        let policy = PressurePolicy.scenario(pollInterval: .seconds(60), holdTime: .seconds(2))
        let recording = MonitorRecording(context, watching: parent, policy: policy)
        let initial = try await recording.start()
        try expect(initial.level == .normal, "initial event \(initial.summary)")
        // A second monitor on the throttled cgroup itself, whose effective limit is its memory.high.
        let own = MonitorRecording(context, watching: throttled, policy: policy)
        let ownInitial = try await own.start()
        try expect(
            ownInitial.snapshot.limit?.bytes == UInt64(high) && ownInitial.snapshot.limit?.file == "memory.high",
            "the throttled cgroup's own limit: \(String(describing: ownInitial.snapshot.limit))")

        try await hog.hold(0.5, of: high)
        try await Task.sleep(for: .seconds(1))
        try expect(recording.count == 1 && own.count == 1, "below memory.high the level changed: \((recording.events + own.events).map(\.summary))")

        let throttledFor = try await hog.hold(high + 2 * mebibyte - hog.baselineBytes, within: .seconds(120)).duration
        context.note("the hog's step 2 MiB past memory.high took \(throttledFor.wholeMilliseconds) ms (throttled)")
        let raise = try await recording.event(number: 1, within: .seconds(15))
        try await Task.sleep(for: .seconds(1))
        let raised = Array(recording.events.dropFirst())
        context.note("raised: " + raised.map(\.summary).joined(separator: ", "))
        try expect(raise.level >= .warning, "the first change is \(raise.summary)")
        for event in raised where event.level > .normal {
            try expect(
                event.source == .memoryEvents || event.source == .psiTrigger,
                "\(event.summary): expected memory-events or psi-trigger (polling is 60 s away)")
        }
        // The hog is alone in the parent: while throttled, all of its tasks stall (PSI full).
        try expect(raised.contains { $0.level == .critical }, "PSI full stalls did not raise critical")
        let ownRaise = try await own.event(number: 1, within: .seconds(5))
        context.note("the throttled cgroup's own monitor: \(ownRaise.summary)")
        // Its usage sits at its limit (memory.high), where adaptive sampling reads every 5 ms: the
        // sample or the memory.events wake, whichever comes first, raises it.
        try expect(
            ownRaise.level >= .warning && (ownRaise.source.isEventDriven || ownRaise.source == .usageSample),
            "on the throttled cgroup itself: \(ownRaise.summary)")
        let counters = try throttled.reader.events()
        let parentCounters = try parent.reader.events()
        try expect(
            counters.high > 0 && parentCounters.high > 0 && counters.oomKill == 0,
            "memory.events: throttled \(counters), parent \(parentCounters)")
        context.note("memory.events high: \(counters.high) in the child, \(parentCounters.high) in the parent; no OOM kill")

        try await hog.hold(0, within: .seconds(120))
        let normal = try await recording.latestEvent(at: .normal, within: .seconds(90))
        context.note("after release: \(normal.summary)")
        try expect(normal.source == .recheck, "the way down should be found by the re-check, was \(normal.source)")
        await hog.stop()
    }
}

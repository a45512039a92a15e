import CgroupKit
import Memwarn
import MemwarnSystem
import MemwarnTestKit
import Testing

@testable import MemwarnMonitor
@testable import MemwarnRelease

/// A monitor on a synthetic cgroup v2 host (plain files, no kernel, no root): usage written in
/// place is found by adaptive sampling within milliseconds, or by the poll every poll_interval
/// when adaptive sampling is off.
@Suite(.serialized)
struct SyntheticHostMonitorTests {
    static let limit: UInt64 = 128 << 20

    static func monitor(_ host: SyntheticHost, policy: PressurePolicy = PressurePolicy()) -> PressureMonitor {
        SyntheticLevelScenarios.monitor(files: host.files, policy: policy)
    }

    @Test func usageWrittenAcrossTheMarksIsFoundByAdaptiveSampling() async throws {
        let host = try SyntheticHost(limit: Self.limit)
        let monitor = Self.monitor(host)
        #expect(monitor.arming?.usageWatch == .adaptiveSampling)
        #expect(monitor.watchedSources.contains { $0.hasPrefix("sample /sys/fs/cgroup/app/memory.current adaptively") }, "\(monitor.watchedSources)")
        try await withRunningMonitor(monitor) { iterator in
            #expect(try await next(&iterator).source == .initial)
            try await SyntheticLevelScenarios.climbFindsBothMarks(&iterator, setUsage: host.setUsage)
        }
        #expect(monitor.usageSampleCount > 0)
    }

    /// A container's view through a cgroup namespace: its own cgroup is the root `/`, whose
    /// `memory.max` is the container's limit. The marks are found there as anywhere.
    @Test func inAContainersOwnCgroupNamespaceTheRootsLimitIsWatched() async throws {
        let host = try SyntheticHost(limit: Self.limit, processCgroup: "/")
        let monitor = Self.monitor(host)
        #expect(monitor.watchedSources.contains { $0.hasPrefix("sample /sys/fs/cgroup/memory.current adaptively") }, "\(monitor.watchedSources)")
        try await withRunningMonitor(monitor) { iterator in
            let first = try await next(&iterator)
            #expect(first.snapshot.capacityBytes == Self.limit, "the namespace root's limit: \(String(describing: first.snapshot.capacityBytes))")
            try host.setUsage(0.85)
            let event = try await next(&iterator, within: .seconds(5))
            #expect(event.level == .warning && event.source == .usageSample, "\(event.level) from \(event.source)")
        }
    }

    @Test func withAdaptiveSamplingOffTheSameClimbWaitsForThePoll() async throws {
        let host = try SyntheticHost(limit: Self.limit)
        var policy = PressurePolicy()
        policy.worstCaseGrowthBytesPerSecond = 0
        policy.pollInterval = .milliseconds(200)
        let monitor = Self.monitor(host, policy: policy)
        #expect(monitor.arming?.usageWatch == .polling)
        try await withRunningMonitor(monitor) { iterator in
            _ = try await next(&iterator)
            let samplesBefore = monitor.usageSampleCount
            let began = ContinuousClock.now
            try host.setUsage(0.85)
            let event = try await next(&iterator, within: .seconds(5))
            #expect(event.level == .warning && event.source == .usageSample)
            // One read per poll interval (the adaptive rule would read every 5 ms this close to a mark).
            let intervals = Int(((ContinuousClock.now - began) / .milliseconds(200)).rounded(.up))
            #expect(monitor.usageSampleCount - samplesBefore <= intervals + 1, "\(monitor.usageSampleCount - samplesBefore) reads in \(intervals) intervals")
        }
    }

    /// The level logic on plain files, as an ordinary user (``SyntheticLevelScenarios``).
    @Test func aFallStepsDownOnlyBelowTheRecoveryMarkAndAfterTheHoldTime() async throws {
        let host = try SyntheticHost(limit: Self.limit)
        var policy = PressurePolicy()
        policy.holdTime = .milliseconds(400)
        let monitor = Self.monitor(host, policy: policy)
        try await withRunningMonitor(monitor) { iterator in
            #expect(try await next(&iterator).level == .normal)
            try await SyntheticLevelScenarios.fallStepsDownOnlyBelowTheRecoveryMarkAndAfterTheHoldTime(
                &iterator, holdTime: policy.holdTime, setUsage: host.setUsage)
        }
    }

    /// One reading per kernel event: a `memory.events` change at normal costs one snapshot, the
    /// engine's (the release thread reads none: it read a second for every reading before); a rise
    /// to warning with a consumer attached costs one more, the measurement of what the release
    /// dropped (it read a third before, afresh, for the target). Only events wake this monitor:
    /// no adaptive sampling, a poll a minute.
    @Test func aKernelEventCostsOneReadingAndAReleaseOneMore() async throws {
        let host = try SyntheticHost(limit: Self.limit, usage: Self.limit / 2)
        var policy = PressurePolicy()
        policy.worstCaseGrowthBytesPerSecond = 0
        policy.pollInterval = .seconds(60)
        policy.recheckInterval = .seconds(60)  // no rechecks while raised: only the events read
        let monitor = Self.monitor(host, policy: policy)
        let coordinator = ReleaseCoordinator(trimsHeap: false)
        let consumer = CacheFixtures.FakeConsumer("cache", tier: .caches, footprint: 64 << 20)
        coordinator.register(consumer)
        let token = coordinator.attach(to: monitor)
        defer { monitor.removeObserver(token) }
        // What a reading may still cost after it: a second read comes within a millisecond.
        let settle = Duration.milliseconds(100)
        try await withRunningMonitor(monitor) { iterator in
            #expect(try await next(&iterator).level == .normal)
            for round in 1...5 {
                let before = monitor.snapshotReadCount
                try host.overwrite("/sys/fs/cgroup/app/memory.events", "low \(round)\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n")
                try await waitUntil("a reading of the memory.events change") { monitor.snapshotReadCount > before }
                try await Task.sleep(for: settle)
                #expect(monitor.snapshotReadCount - before == 1, "round \(round): \(monitor.snapshotReadCount - before) readings for one event")
            }
            let before = monitor.snapshotReadCount
            try host.setUsage(0.85)
            try host.overwrite("/sys/fs/cgroup/app/memory.events", "low 5\nhigh 1\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n")
            let warning = try await next(&iterator, within: .seconds(5))
            #expect(warning.level == .warning, "\(warning.level) from \(warning.source)")
            try await waitUntil("the release") { !consumer.requests.isEmpty }
            try await Task.sleep(for: settle)
            // The engine's reading and the measurement after the release; a third only when the
            // release thread took the reading more than 10 ms late (a loaded machine) and read
            // afresh. The rounds above are the strict check: the old loop read twice each.
            let reads = monitor.snapshotReadCount - before
            #expect((2...3).contains(reads), "\(reads) readings for a warning and its release")
        }
    }

    @Test func aMemoryEventsChangeWakesTheMonitorAtOnce() async throws {
        let host = try SyntheticHost(limit: Self.limit)
        let monitor = Self.monitor(host)
        try await withRunningMonitor(monitor) { iterator in
            _ = try await next(&iterator)
            try host.overwrite("/sys/fs/cgroup/app/memory.events", "low 0\nhigh 3\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n")
            let event = try await next(&iterator, within: .seconds(5))
            #expect(event.level == .warning && event.source == .memoryEvents, "\(event.level) from \(event.source)")
        }
    }

    /// A policy applied while running (issue 38, item 1) on cgroup v2, as any user: the marks
    /// move under the usage (one event, from the policy), the watch of `memory.events` and the
    /// adaptive sampling are armed again, and they go on finding changes.
    @Test func aPolicyAppliedWhileRunningMovesTheMarksOnV2AndTheWatchGoesOn() async throws {
        let host = try SyntheticHost(limit: Self.limit)
        let monitor = Self.monitor(host)
        try host.setUsage(0.6)
        try await withRunningMonitor(monitor) { iterator in
            #expect(try await next(&iterator).level == .normal)
            var lowered = monitor.configuration.policy
            (lowered.warningRatio, lowered.recoveryRatio) = (0.5, 0.4)
            try monitor.apply(policy: lowered)
            let moved = try await next(&iterator, within: .seconds(5))
            #expect(moved.level == .warning && moved.previous == .normal && moved.source == .policyChange, "\(moved)")
            #expect(monitor.arming?.usageWatch == .adaptiveSampling, "armed again, sampling: \(String(describing: monitor.arming))")
            #expect(monitor.watchedSources.contains { $0.hasPrefix("inotify") && $0.contains("memory.events") }, "\(monitor.watchedSources)")
            // The new session's sources work: a climb past the critical mark is found.
            try host.setUsage(0.95)
            let critical = try await next(&iterator, within: .seconds(5))
            #expect(critical.level == .critical && critical.source == .usageSample, "\(critical.level) from \(critical.source)")
        }
    }

    @Test func observersAddedWhileLevelsChangeHearEachEventOnceAndInOrder() async throws {
        let host = try SyntheticHost(limit: Self.limit)
        var policy = PressurePolicy()
        policy.holdTime = .zero
        let monitor = Self.monitor(host, policy: policy)
        let running = Task { try await monitor.run() }
        defer { running.cancel() }
        var heard: [Locked<[LevelEvent]>] = []
        for round in 0..<40 {
            try host.setUsage(round.isMultiple(of: 2) ? 0.85 : 0.5)
            let log = Locked<[LevelEvent]>([])
            monitor.addObserver { event in log.withLock { $0.append(event) } }
            heard.append(log)
            try await Task.sleep(for: .milliseconds(3))
        }
        try host.setUsage(0.5)
        try await Task.sleep(for: .milliseconds(200))  // the last readings land
        for (index, log) in heard.enumerated() {
            let events = log.withLock { $0 }
            #expect(!events.isEmpty, "observer \(index) heard nothing, not even the latest event")
            for (earlier, later) in zip(events, events.dropFirst()) {
                #expect(earlier.snapshot.time < later.snapshot.time, "observer \(index): \(earlier.level) then \(later.level), out of order or twice")
            }
        }
    }
}

import CgroupKit
import MemwarnSystem
import MemwarnTestFixtures
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
            // Found by the usage sampler, or by a reading another source took first (the PSI
            // poll's, on a busy machine): either reads the root's usage against its limit.
            #expect(event.level == .warning && [.usageSample, .poll].contains(event.source), "\(event.level) from \(event.source)")
            #expect(event.snapshot.capacityBytes == Self.limit)
        }
    }

    /// On the engine's manual clock: usage is read once a poll interval and not in between (the
    /// adaptive rule would read every 5 ms this close to a mark), so the crossing waits for the poll.
    @Test func withAdaptiveSamplingOffTheSameClimbWaitsForThePoll() throws {
        let host = try SyntheticHost(limit: Self.limit)
        var policy = PressurePolicy()
        policy.worstCaseGrowthBytesPerSecond = 0
        policy.pollInterval = .milliseconds(200)
        let engine = try DrivenEngine(files: host.files, policy: policy)
        try engine.start()
        #expect(engine.usageWatch == .polling)
        let samplesBefore = engine.samples.value
        try host.setUsage(0.85)
        try engine.advance(by: .milliseconds(199))
        #expect(engine.level == .normal && engine.samples.value == samplesBefore, "\(engine.samples.value - samplesBefore) reads before the poll")
        try engine.advance(by: .milliseconds(1))
        #expect(engine.events.last?.level == .warning && engine.events.last?.source == .usageSample, "\(engine.events.map { "\($0.level) \($0.source)" })")
        #expect(engine.samples.value - samplesBefore == 1)
        for _ in 0..<5 { try engine.advance(by: .milliseconds(200)) }
        #expect(engine.samples.value - samplesBefore == 6, "one read a poll interval: \(engine.samples.value - samplesBefore) in 1.2 s")
    }

    /// The level logic on plain files, as an ordinary user (``SyntheticLevelScenarios``).
    @Test func aFallStepsDownOnlyBelowTheRecoveryMarkAndAfterTheHoldTime() throws {
        let host = try SyntheticHost(limit: Self.limit)
        let engine = try DrivenEngine(files: host.files)
        try engine.start()
        #expect(engine.level == .normal)
        try SyntheticLevelScenarios.fallStepsDownOnlyBelowTheRecoveryMarkAndAfterTheHoldTime(
            engine, holdTime: PressurePolicy().holdTime, setUsage: host.setUsage)
    }

    /// One reading per kernel event, and one level decision per reading: a `memory.events` change
    /// at normal costs one snapshot, the engine's, decided once (the release loop reads none and
    /// decides nothing); a rise to warning with a consumer attached costs one measurement more,
    /// of what the release dropped. The engine is driven on a manual clock that stands still:
    /// only the events read (no sampling, no poll), and every count is exact after each turn.
    @Test func aKernelEventCostsOneReadingOneDecisionAndAReleaseOneMeasurement() throws {
        let host = try SyntheticHost(limit: Self.limit, usage: Self.limit / 2)
        var policy = PressurePolicy()
        policy.worstCaseGrowthBytesPerSecond = 0
        let engine = try DrivenEngine(files: host.files, policy: policy)
        let coordinator = ReleaseCoordinator(trimsHeap: false)
        let consumer = CacheFixtures.FakeConsumer("cache", tier: .caches, footprint: 64 << 20)
        coordinator.register(consumer)
        _ = engine.coordinators.attach(coordinator, id: 1)
        try engine.start()
        #expect(engine.events.map(\.level) == [.normal])
        func counts() -> (readings: Int, decisions: Int, measurements: Int) {
            (engine.sampler.readCount, engine.decisions.value, engine.sampler.measurementCount)
        }
        for round in 1...5 {
            let before = counts()
            try host.overwrite("/sys/fs/cgroup/app/memory.events", "low \(round)\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n")
            try engine.turn()
            let after = counts()
            #expect(after.readings - before.readings == 1, "round \(round): \(after.readings - before.readings) readings for one event")
            #expect(after.decisions - before.decisions == 1, "round \(round): \(after.decisions - before.decisions) level decisions for one reading")
            #expect(after.measurements == before.measurements, "round \(round): no release, nothing measured")
        }
        let before = counts()
        try host.setUsage(0.85)
        try host.overwrite("/sys/fs/cgroup/app/memory.events", "low 5\nhigh 1\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n")
        try engine.turn()
        let warning = try #require(engine.events.last)
        #expect(warning.level == .warning && warning.source == .memoryEvents, "\(warning.level) from \(warning.source)")
        #expect(!consumer.requests.isEmpty, "the release ran")
        let after = counts()
        #expect(after.readings - before.readings == 1, "\(after.readings - before.readings) readings for a warning")
        #expect(after.decisions - before.decisions == 1, "\(after.decisions - before.decisions) level decisions for a warning")
        #expect(after.measurements - before.measurements == 1, "\(after.measurements - before.measurements) measurements for one release")
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

    /// A policy applied while running on cgroup v2, as any user: the marks
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
            try await Task.sleep(for: .milliseconds(3))  // the pace of the race: readings land between the adds
        }
        try host.setUsage(0.5)
        try await waitUntil("every observer heard the latest event") {
            monitor.level == .normal && heard.allSatisfy { log in log.withLock { $0.last } == monitor.latestEvent }
        }
        for (index, log) in heard.enumerated() {
            let events = log.withLock { $0 }
            #expect(!events.isEmpty, "observer \(index) heard nothing, not even the latest event")
            for (earlier, later) in zip(events, events.dropFirst()) {
                #expect(earlier.snapshot.time < later.snapshot.time, "observer \(index): \(earlier.level) then \(later.level), out of order or twice")
            }
        }
    }
}

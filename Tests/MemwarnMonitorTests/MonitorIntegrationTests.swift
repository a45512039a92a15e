import CgroupKit
import MemwarnRelease
import MemwarnTestFixtures
import MemwarnTestKit
import MemwarnTestTraits
import Testing

@testable import MemwarnMonitor

/// The monitor on real cgroup v1 memory cgroups, with a real child process holding memory.
@Suite(.serialized, .tags(.root, .cgroupV1), .needsRealCgroups)
struct MonitorIntegrationTests {
    static let limit: UInt64 = 64 << 20

    @Test func levelsRiseToWarningThenCriticalAndFallToNormalFromEventDrivenSources() async throws {
        try await withTestCgroup(limit: Self.limit) { cgroup in
            let hog = try MemoryHog()
            try cgroup.add(pid: hog.pid)
            let overhead = Int(try cgroup.usage())
            var configuration = MonitorConfiguration(cgroupPath: cgroup.location.directory)
            // Short, so the test is quick; long enough that a drop seen mid-way (while the hog
            // unmaps) is not reported as its own step.
            configuration.policy.holdTime = .milliseconds(300)
            configuration.watchesPressureStall = false
            let monitor = PressureMonitor(configuration: configuration, logger: testLogger)
            let events = try await withRunningMonitor(monitor) { iterator in
                let first = try await next(&iterator)
                #expect(first.level == .normal && first.previous == nil && first.source == .initial)
                try await waitForUsageThresholds(monitor)
                #expect(first.snapshot.limit?.bytes == Self.limit)
                var seen: [LevelEvent] = []
                for fraction in [0.60, 0.85, 0.95] {
                    try hog.hold(fraction, of: cgroup, besides: overhead)
                    if fraction > 0.6 { seen.append(try await next(&iterator)) }
                }
                try hog.hold(0)
                seen.append(try await next(&iterator))
                return seen
            }
            #expect(events.map(\.level) == [.warning, .critical, .normal])
            #expect(events.map(\.previous) == [.normal, .warning, .critical])
            for event in events {
                #expect(event.source.isEventDriven, "\(event.level) came from \(event.source)")
            }
            #expect(events[0].snapshot.ratio >= 0.8 && events[0].snapshot.ratio < 0.9)
            #expect(events[1].snapshot.ratio >= 0.9)
            #expect(events[2].snapshot.ratio < 0.7)
            hog.terminate()
        }
    }

    @Test func stepsDownOnlyAfterTheHoldTimeAndNamesTheSignalThatSawTheDrop() async throws {
        try await withTestCgroup(limit: Self.limit) { cgroup in
            let hog = try MemoryHog()
            try cgroup.add(pid: hog.pid)
            let overhead = Int(try cgroup.usage())
            var configuration = MonitorConfiguration(cgroupPath: cgroup.location.directory)
            configuration.policy.holdTime = .milliseconds(600)
            configuration.watchesPressureStall = false
            let monitor = PressureMonitor(configuration: configuration, logger: testLogger)
            try await withRunningMonitor(monitor) { iterator in
                _ = try await next(&iterator)
                try await waitForUsageThresholds(monitor)
                try hog.hold(0.85, of: cgroup, besides: overhead)
                let warning = try await next(&iterator)
                #expect(warning.level == .warning)
                let dropped = ContinuousClock.now
                try hog.hold(0)
                let normal = try await next(&iterator)
                #expect(normal.level == .normal)
                #expect(ContinuousClock.now - dropped >= .milliseconds(600))
                // The thresholds crossed on the way up are paused for 100 ms after they fired
                // (ThresholdPlanner.quietAfterFiring), so the guard band's sampling near the
                // critical mark may see the drop first: either signal, not the hold's recheck.
                #expect([.usageThreshold, .usageSample].contains(normal.source), "\(normal.source)")
            }
            hog.terminate()
        }
    }

    @Test func registersUsageThresholdsAtTheMarksOfTheEffectiveLimit() async throws {
        try await withTestCgroup(limit: Self.limit) { cgroup in
            var configuration = MonitorConfiguration(cgroupPath: cgroup.location.directory)
            configuration.watchesPressureStall = false
            let monitor = PressureMonitor(configuration: configuration, logger: testLogger)
            let sources = try await withRunningMonitor(monitor) { iterator in
                _ = try await next(&iterator)
                try await waitForUsageThresholds(monitor)
                return monitor.watchedSources
            }
            let registered = sources.filter { $0.hasPrefix("usage-threshold") || $0.hasPrefix("usage-guard") }
            // The marks, and every 5 % from half the limit up (readings for the growth estimate), and
            // a guard below each mark; each byte count once.
            let expected = expectedUsageThresholds(limit: Self.limit)
            #expect(registered.count == expected.thresholds.union(expected.guards).count, "\(registered)")
            for bytes in expected.thresholds.union(expected.guards) {
                #expect(registered.contains { $0.hasPrefix("usage-threshold \(bytes) ") || $0.hasPrefix("usage-guard \(bytes) ") }, "\(bytes): \(registered)")
            }
            #expect(sources.contains("oom-control"))
            #expect(!sources.contains { $0.hasPrefix("poll") }, "a v1 cgroup with a limit needs no polling: \(sources)")
            #expect(sources.contains { $0.hasPrefix("sample ") && $0.contains("guard band") }, "sampled only in the guard bands: \(sources)")
        }
    }

    @Test func anOOMKillInTheCgroupIsReportedAsCriticalByTheOOMNotification() async throws {
        try await withTestCgroup(limit: Self.limit) { cgroup in
            let hog = try MemoryHog()
            try cgroup.add(pid: hog.pid)
            var configuration = MonitorConfiguration(cgroupPath: cgroup.location.directory)
            configuration.watchesPressureStall = false
            // A critical mark above 1 turns usage-based critical off: only the kernel's
            // notifications on the way to the OOM kill can raise it.
            configuration.policy.recoveryRatio = 0.98
            configuration.policy.warningRatio = 0.99
            configuration.policy.criticalRatio = 1.5
            configuration.policy.holdTime = .seconds(30)
            let monitor = PressureMonitor(configuration: configuration, logger: testLogger)
            let critical = try await withRunningMonitor(monitor) { iterator in
                _ = try await next(&iterator)
                #expect(throws: ChildProcessError.self) { try hog.hold(Int(Self.limit) * 2) }
                var event = try await next(&iterator)
                while event.level != .critical { event = try await next(&iterator) }
                return event
            }
            #expect(critical.source == .oom || critical.source == .pressureLevel, "critical came from \(critical.source)")
            let counters = try CgroupMemoryReader(location: cgroup.location).events()
            #expect(counters.oomKill >= 1)
            hog.terminate()
        }
    }

    @Test func aCgroupDeletedUnderTheMonitorEndsItWithNotFound() async throws {
        let cgroup = try TestCgroup(limit: Self.limit)
        var removed = false
        defer { if !removed { try? cgroup.remove() } }
        var configuration = MonitorConfiguration(cgroupPath: cgroup.location.directory)
        configuration.watchesPressureStall = false
        let monitor = PressureMonitor(configuration: configuration, logger: testLogger)
        var iterator = monitor.events().makeAsyncIterator()
        let running = Task { try await monitor.run() }
        _ = try await next(&iterator)
        try cgroup.remove()
        removed = true
        let error = await #expect(throws: CgroupError.self) { try await running.value }
        #expect(error?.code == .notFound)
    }

    /// Two runs at once: whichever takes the monitor runs, and the other is refused at once. The
    /// monitor is armed by its initializer (its first event comes from there), so neither run is
    /// known to start first: a second run made after the first event could still come first, and
    /// then the run expected to be refused was the one running (seen: it waited forever).
    @Test(.timeLimit(.minutes(1))) func runningTwiceAtOnceIsRejected() async throws {
        try await withTestCgroup(limit: Self.limit) { cgroup in
            var configuration = MonitorConfiguration(cgroupPath: cgroup.location.directory)
            configuration.watchesPressureStall = false
            let monitor = PressureMonitor(configuration: configuration, logger: testLogger)
            // The first to end is the refused one; the other runs until cancelled.
            let endings = try await withThrowingTaskGroup(of: (any Error)?.self) { group in
                for _ in 0..<2 {
                    group.addTask {
                        do {
                            try await monitor.run()
                            return nil
                        } catch {
                            return error
                        }
                    }
                }
                var endings: [(any Error)?] = []
                endings.append(try await group.next() ?? nil)
                group.cancelAll()
                endings.append(try await group.next() ?? nil)
                return endings
            }
            #expect((endings[0] as? MonitorError)?.code == .alreadyRunning, "\(String(describing: endings[0]))")
            #expect(endings[1] == nil, "the other ran until cancelled: \(String(describing: endings[1]))")
        }
    }
}

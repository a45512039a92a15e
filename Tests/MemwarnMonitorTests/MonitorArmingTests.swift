import MemwarnRelease
import MemwarnTestFixtures
import MemwarnTestKit
import MemwarnTestTraits
import Metrics
import Testing

@testable import CgroupKit
@testable import MemwarnMonitor

/// A monitor is armed by its initializer: sources registered, first reading taken, release thread
/// waiting, before the services it protects run; the usage thresholds of cgroup v1 follow behind.
@Suite(.serialized, .tags(.root, .cgroupV1), .needsRealCgroups)
struct MonitorArmingTests {
    static let limit: UInt64 = 64 << 20

    static func configuration(_ cgroup: TestCgroup) -> MonitorConfiguration {
        var configuration = MonitorConfiguration(cgroupPath: cgroup.location.directory, environment: [:])
        configuration.watchesPressureStall = false
        return configuration
    }

    @Test func theInitializerReturnsArmedWithAFirstReadingAndThresholdsFollow() async throws {
        try await withTestCgroup(limit: Self.limit) { cgroup in
            let monitor = PressureMonitor(configuration: Self.configuration(cgroup), logger: testLogger)
            let expected = expectedUsageThresholds(limit: Self.limit)
            let count = expected.thresholds.union(expected.guards).count  // 13 on 1 or 2 CPUs
            let arming = try #require(monitor.arming, "armed by its initializer")
            #expect(arming.usageWatch == .adaptiveSampling && arming.pendingThresholds == count)
            #expect(arming.duration > .zero && arming.sinceProcessStart != nil)
            #expect(monitor.latestEvent?.source == .initial && monitor.latestEvent?.snapshot.limit?.bytes == Self.limit)
            #expect(monitor.watchedSources.contains("oom-control"))
            #expect(monitor.watchedSources.contains { $0.hasPrefix("usage thresholds: \(count) being registered") }, "\(monitor.watchedSources)")
            // Not yet run: the thresholds register all the same (protection does not wait for run()).
            try await waitForUsageThresholds(monitor)
            #expect(monitor.watchedSources.filter { $0.hasPrefix("usage-threshold") || $0.hasPrefix("usage-guard") }.count == count)
            #expect(arming.thresholdsRegisteredAfter == nil && monitor.arming?.thresholdsRegisteredAfter != nil)
            #expect(!monitor.watchedSources.contains { $0.hasPrefix("usage thresholds:") })
        }
    }

    @Test func anObserverAddedAfterTheInitializerHearsTheFirstReadingFirst() async throws {
        try await withTestCgroup(limit: Self.limit) { cgroup in
            let monitor = PressureMonitor(configuration: Self.configuration(cgroup), logger: testLogger)
            let (heard, continuation) = AsyncStream.makeStream(of: LevelEvent.self)
            monitor.addObserver { continuation.yield($0) }
            var iterator = heard.makeAsyncIterator()
            let first = try await next(&iterator, within: .seconds(5), waitingFor: "the first reading")
            #expect(first.source == .initial && first.previous == nil)
        }
    }

    @Test func aMonitorThatCannotBeArmedSaysSoInRunAndEndsItsStreams() async throws {
        let monitor = PressureMonitor(configuration: MonitorConfiguration(cgroupPath: "/no-such-memwarn-cgroup", environment: [:]), logger: testLogger)
        #expect(monitor.arming == nil && monitor.usageWatch == nil)
        var events = monitor.events().makeAsyncIterator()
        let error = await #expect(throws: CgroupError.self) { try await monitor.run() }
        #expect(error?.code == .notFound)
        #expect(await events.next() == nil, "a stream made before run() ends with it")
    }

    @Test func aMonitorRunAgainAfterItStoppedIsArmedAnew() async throws {
        try await withTestCgroup(limit: Self.limit) { cgroup in
            let monitor = PressureMonitor(configuration: Self.configuration(cgroup), logger: testLogger)
            for _ in 0..<2 {
                let running = Task { try await monitor.run() }
                try await waitForUsageThresholds(monitor)
                running.cancel()
                try await running.value
                #expect(monitor.arming == nil && monitor.usageWatch == nil, "a stopped monitor is not armed")
            }
        }
    }

    @Test(.timeLimit(.minutes(1))) func aMonitorReleasedUnrunIsFreedAndASessionStoppedUnrunEndsBothThreads() async throws {
        try await withTestCgroup(limit: Self.limit) { cgroup in
            weak var released: PressureMonitor?
            do {
                let monitor = PressureMonitor(configuration: Self.configuration(cgroup), logger: testLogger)
                released = monitor
                #expect(monitor.arming != nil)
            }
            #expect(released == nil, "nothing of its own threads keeps a monitor alive")

            let metrics = MonitorMetrics(factory: MetricsSystem.factory)
            let session = try MonitorSession.arm(
                .init(
                    configuration: Self.configuration(cgroup), logger: testLogger, metrics: metrics,
                    samples: UsageSampleCount(metrics: metrics),
                    output: { RecordedOutput() }, coordinators: AttachedCoordinators(), exhaustionChanged: { _ in },
                    leases: AgentLeases(policy: PressurePolicy())))
            session.stop()
            // Returns once the engine's thread and the release thread have both ended (a release
            // thread left running would keep it waiting: the time limit shows that as a failure).
            try await session.waitUntilEnded()
            session.stop()  // a stopped session may be asked again: the work is dropped
        }
    }

    @Test func aUsageFileWhoseCgroupIsRemovedReadsAsNotFound() throws {
        let cgroup = try TestCgroup(limit: Self.limit)
        var removed = false
        defer { if !removed { try? cgroup.remove() } }
        let usage = try UsageFile(cgroup.location.file("memory.usage_in_bytes"), format: .bytes)
        #expect(try usage.read() == 0)
        try cgroup.remove()
        removed = true
        let error = #expect(throws: CgroupError.self) { try usage.read() }
        #expect(error?.code == .notFound, "\(String(describing: error))")
    }
}

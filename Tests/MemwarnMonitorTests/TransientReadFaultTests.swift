import CgroupKit
import MemwarnRelease
import MemwarnSystem
import MemwarnTestFixtures
import MemwarnTestKit
import MetricsTestKit
import Testing

@testable import MemwarnMonitor

#if canImport(Glibc)
import Glibc
#endif

/// Reads that fail on purpose, on a synthetic cgroup v2 host (plain files, no root): a
/// `ReadFaultPlan` on the monitor's `KernelFiles` fails the opens and reads of chosen files with
/// a chosen `errno` while the monitor runs. A transient error (out of descriptors or memory,
/// interrupted) is retried and changes no level, and what happened meanwhile is found once reads
/// work again; an error that says the cgroup is gone ends the run.
@Suite(.serialized)
struct TransientReadFaultTests {
    static let limit: UInt64 = 128 << 20
    static let usageFile = "/app/memory.current"

    /// A monitor reading `host` through `plan`, its metrics in `metrics`.
    static func monitor(
        _ host: SyntheticHost, _ plan: ReadFaultPlan, policy: PressurePolicy = PressurePolicy(), metrics: TestMetrics = TestMetrics()
    ) -> PressureMonitor {
        var configuration = MonitorConfiguration(policy: policy, environment: [:])
        configuration.files = host.files
        configuration.files.faultPlan = plan
        configuration.watchesPressureStall = false
        return PressureMonitor(configuration: configuration, logger: testLogger, metricsFactory: metrics)
    }

    /// Every `errno` the engine retries: the usage file failing with it for a while keeps the
    /// sources and the level, is counted (the count, the last error, the metric) and reported
    /// over, and usage written across the warning mark during the episode is a warning after it.
    @Test(arguments: SystemError.transientErrnos.sorted())
    func usageReadsFailingTransientlyAreRetriedAndACrossingMeanwhileIsFoundAfter(errno: Int32) async throws {
        let host = try SyntheticHost(limit: Self.limit, usage: Self.limit / 2)
        let plan = ReadFaultPlan()
        let metrics = TestMetrics()
        let monitor = Self.monitor(host, plan, metrics: metrics)
        let sources = monitor.watchedSources
        try await withRunningMonitor(monitor) { iterator in
            #expect(try await next(&iterator).level == .normal)
            plan.fail(of: Self.usageFile, with: errno)
            try await waitUntil("3 transient errors") { monitor.transientErrorCount >= 3 && monitor.isRetryingReads }
            let error = try #require(monitor.lastTransientError)
            #expect(error.code == .unreadable && error.errno == errno && error.isTransient, "\(error)")
            #expect(error.path?.hasSuffix(Self.usageFile) == true, "\(error)")
            #expect(monitor.watchedSources == sources && monitor.usageWatch == .adaptiveSampling, "the sources are kept: \(monitor.watchedSources)")

            try host.setUsage(0.85)
            let failuresAtTheWrite = monitor.transientErrorCount
            try await waitUntil("3 more failed reads after usage crossed the warning mark") { monitor.transientErrorCount >= failuresAtTheWrite + 3 }
            #expect(monitor.level == .normal && monitor.latestEvent?.source == .initial, "a failed read is no reading: \(monitor.level)")

            plan.clear()
            let warning = try await next(&iterator, within: .seconds(5), waitingFor: "the warning once reads work again")
            #expect(warning.level == .warning && warning.previous == .normal, "\(warning.level) from \(warning.source)")
            try await waitUntil("the episode reported over") { !monitor.isRetryingReads }
            #expect(monitor.transientErrorCount == plan.forcedCount, "every forced failure counted once: \(monitor.transientErrorCount) of \(plan.forcedCount)")
            #expect(try metrics.expectCounter("memwarn_transient_errors_total").totalValue == Int64(monitor.transientErrorCount))
            #expect(monitor.lastTransientError?.errno == errno, "the last error stays for the operator")
        }
    }

    /// Raised to warning, with no hold time (a lower reading would step down at once): 20 failed
    /// reads of usage, sampled and full, change no level; the next level event is the critical
    /// one usage written afterwards causes.
    @Test func aFailedReadChangesNoLevel() async throws {
        let host = try SyntheticHost(limit: Self.limit, usage: Self.limit / 2)
        let plan = ReadFaultPlan()
        var policy = PressurePolicy()
        policy.holdTime = .zero
        let monitor = Self.monitor(host, plan, policy: policy)
        try await withRunningMonitor(monitor) { iterator in
            #expect(try await next(&iterator).level == .normal)
            try host.setUsage(0.85)
            let warning = try await next(&iterator, within: .seconds(5))
            #expect(warning.level == .warning, "\(warning.level) from \(warning.source)")

            plan.fail(of: Self.usageFile, with: ENOMEM, times: 20)
            try await waitUntil("the 20 failures and the episode's end") { !plan.isActive && !monitor.isRetryingReads }
            #expect(monitor.transientErrorCount > 0, "the failures were the monitor's reads")
            let samples = monitor.usageSampleCount
            try await waitUntil("a read of usage after the episode") { monitor.usageSampleCount > samples }
            #expect(monitor.level == .warning && monitor.latestEvent?.snapshot.time == warning.snapshot.time, "no event from a failed read")

            try host.setUsage(0.95)
            let critical = try await next(&iterator, within: .seconds(5), waitingFor: "the critical event")
            #expect(
                critical.level == .critical && critical.previous == .warning,
                "the next event after the episode: \(critical.level) from \(critical.previous?.rawValue ?? "none")")
        }
    }

    /// A read that says the cgroup is gone (`ENODEV`, as the kernel fails a removed cgroup's held
    /// file; `ENOENT`) ends the run with `.notFound`; another that may not pass (`EIO`) with
    /// `.unreadable`. Neither is retried: the first such failure ends it.
    @Test(.timeLimit(.minutes(1)), arguments: [(ENODEV, CgroupError.Code.notFound), (ENOENT, .notFound), (EIO, .unreadable)])
    func aFatalReadErrorEndsTheRun(errno: Int32, code: CgroupError.Code) async throws {
        let host = try SyntheticHost(limit: Self.limit, usage: Self.limit / 2)
        let plan = ReadFaultPlan()
        let monitor = Self.monitor(host, plan)
        #expect(monitor.latestEvent?.level == .normal, "armed, its first reading taken")
        plan.fail([.read], of: Self.usageFile, with: errno)
        let running = Task { try await monitor.run() }
        defer { running.cancel() }
        let outcome = await running.result  // a run that never ends fails the time limit
        guard case .failure(let failure) = outcome else {
            Issue.record("run() returned without an error")
            return
        }
        let error = try #require(failure as? CgroupError, "\(failure)")
        #expect(error.code == code && error.errno == errno, "\(error.debugDescription)")
        #expect(
            plan.forcedCount == 1 && monitor.transientErrorCount == 0, "not retried: \(plan.forcedCount) failures, \(monitor.transientErrorCount) transient")
    }

    /// `memory.events` changes while its reads fail transiently: the watch's drain is retried
    /// (4 times here, 150 ms), and the change (a `high` event: warning) is seen once it reads
    /// again — though usage, sampled every few milliseconds just below the warning mark, read
    /// fine meanwhile (its success ended the episode and dropped the retry before).
    @Test func aMemoryEventsChangeWhoseReadFailsIsSeenOnTheRetry() async throws {
        let host = try SyntheticHost(limit: Self.limit, usage: Self.limit / 100 * 78)
        let plan = ReadFaultPlan()
        let monitor = Self.monitor(host, plan)
        try await withRunningMonitor(monitor) { iterator in
            #expect(try await next(&iterator).level == .normal)
            plan.fail(of: "/app/memory.events", with: EAGAIN)
            try host.overwrite("/sys/fs/cgroup/app/memory.events", "low 0\nhigh 3\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n")
            try await waitUntil("the read after the event and 3 retries, all failed") { plan.forcedCount(of: "/memory.events") >= 4 }
            #expect(monitor.isRetryingReads, "usage reads succeed, but the retry still owes memory.events its read")
            #expect(monitor.level == .normal && monitor.lastTransientError?.path?.hasSuffix("/app/memory.events") == true)
            plan.clear()
            let event = try await next(&iterator, within: .seconds(5), waitingFor: "the memory.events change, once read")
            #expect(event.level == .warning && event.source == .memoryEvents, "\(event.level) from \(event.source)")
            try await waitUntil("the episode reported over") { !monitor.isRetryingReads }
        }
    }

    /// The limit file (read by every full reading, not by the sampler) fails while usage crosses
    /// the warning mark: the sampler's wake is carried by the retry, and the warning comes from
    /// it once the limit reads again — not from the next poll (30 s away here, so waiting for it
    /// fails the test).
    @Test func aCrossingWhoseFullReadingFailsIsReportedByTheRetryNotThePoll() async throws {
        let host = try SyntheticHost(limit: Self.limit, usage: Self.limit / 2)
        let plan = ReadFaultPlan()
        var policy = PressurePolicy()
        policy.pollInterval = .seconds(30)
        let monitor = Self.monitor(host, plan, policy: policy)
        try await withRunningMonitor(monitor) { iterator in
            #expect(try await next(&iterator).level == .normal)
            plan.fail(of: "/app/memory.max", with: ENFILE)
            try host.setUsage(0.85)
            try await waitUntil("the crossing's full reading and a retry, both failed") { plan.forcedCount(of: "/memory.max") >= 2 }
            #expect(monitor.isRetryingReads && monitor.level == .normal)
            plan.clear()
            let warning = try await next(&iterator, within: .seconds(5), waitingFor: "the warning from the retried reading")
            #expect(warning.level == .warning && warning.source == .usageSample, "\(warning.level) from \(warning.source)")
        }
    }
}

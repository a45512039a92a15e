import CgroupKit
import MemwarnSystem
import MemwarnTestFixtures
import MemwarnTestKit
import MemwarnTestTraits
import Testing

@testable import MemwarnMonitor
@testable import MemwarnRelease

#if canImport(Glibc)
import Glibc
#endif

/// cgroup v1 as root: the kernel checks usage thresholds only every 128 page events per CPU, so
/// a crossing by a small step followed by silence can go unreported. The guard threshold below
/// each mark starts sampling there, and the sampler finds the crossing in milliseconds. (Before
/// the guards, a 1 s re-read found it while usage sat between the recovery and warning marks; at
/// `.normal` nothing else would.)
@Suite(.serialized, .tags(.root, .cgroupV1), .needsRealCgroups)
struct GuardBandTests {
    static let limit: UInt64 = 64 << 20

    /// Driven on a manual clock: once the thresholds are in, ten seconds go by on it far below
    /// every mark without one read of usage (the kernel's thresholds watch there).
    @Test func registersAGuardThresholdBelowEachMarkAndSamplesOnlyInsideTheBands() async throws {
        try await withTestCgroup(limit: Self.limit) { cgroup in
            let engine = try DrivenEngine(files: .host, cgroupPath: cgroup.location.directory)
            try engine.start()
            // Armed at once, sampling, while the thresholds are registered behind it.
            #expect(engine.usageWatch == .adaptiveSampling)
            let expected = expectedUsageThresholds(limit: Self.limit)
            #expect(engine.pendingThresholds == expected.thresholds.union(expected.guards).count, "10 thresholds and 3 guards, less any that coincide")
            #expect(engine.sources.contains { $0.hasPrefix("sample ") && $0.contains("adaptively") }, "\(engine.sources)")
            try engine.turn(until: { engine.usageWatch == .thresholds }, "the usage thresholds registered")
            let sources = engine.sources
            let guards = sources.filter { $0.hasPrefix("usage-guard") }
            #expect(guards.count == 3, "one guard below the recovery, warning and critical marks: \(sources)")
            for guardBytes in expected.guards {
                #expect(guards.contains { $0.hasPrefix("usage-guard \(guardBytes) bytes") }, "no guard at \(guardBytes): \(guards)")
            }
            #expect(sources.contains { $0.hasPrefix("sample ") && $0.contains("guard band") }, "\(sources)")
            // Far below every mark (an empty cgroup), nothing is sampled: the kernel's thresholds watch.
            let before = engine.samples.value
            for _ in 0..<100 { try engine.advance(by: .milliseconds(100)) }
            #expect(engine.samples.value == before, "\(engine.samples.value - before) reads in 10 s far below the marks")
        }
    }

    @Test func aCrossingTheKernelDoesNotReportIsFoundByTheGuardsSampling() async throws {
        try await withTestCgroup(limit: Self.limit) { cgroup in
            let hog = try MemoryHog()
            defer { hog.terminate() }
            try cgroup.add(pid: hog.pid)
            var configuration = MonitorConfiguration(cgroupPath: cgroup.location.directory, environment: [:])
            configuration.watchesPressureStall = false
            configuration.policy.holdTime = .zero
            let monitor = PressureMonitor(configuration: configuration, logger: testLogger)
            let seen = Locked<[(event: LevelEvent, nanoseconds: UInt64)]>([])
            monitor.addObserver { event in seen.withLock { $0.append((event, ChildProcess.monotonicNanoseconds())) } }
            let mark = Int(Double(Self.limit) * configuration.policy.warningRatio)
            var found: [(source: PressureSignal, milliseconds: Int64)] = []
            let running = Task { try await monitor.run() }
            defer { running.cancel() }
            try await waitForUsageThresholds(monitor)
            // Attempts, not a time: under the other suites' load many are spoiled (below) and
            // do not count; 16 good ones are enough, however many attempts that takes — and more,
            // while the kernel has reported every crossing so far (it checks usage every 128 page
            // events a CPU, so now and then it reports even a crossing of a few pages).
            var attempts = 0
            for _ in 0..<150 where found.count < 16 || !found.contains(where: { $0.source == .usageSample }) {
                attempts += 1
                // Back below the recovery mark, and known to be there.
                var held = try hog.hold(Int(Double(Self.limit) * 0.6))
                try await waitUntil { monitor.level == .normal }
                // Just under the mark (the cgroup's usage, measured, not guessed) …
                held = try hog.hold(held.bytes + mark - Int(try cgroup.usage()) - (256 << 10))
                held = try hog.hold(held.bytes + mark - Int(try cgroup.usage()) - (16 << 10))
                guard try cgroup.usage() < UInt64(mark), monitor.level == .normal else { continue }  // the charge stock jumped
                // … then steps of a few pages until usage is 320 KiB across it, and silence. (A few
                // more pages would have the kernel check and report it almost every time.)
                var step = held
                var began: UInt64?
                while try cgroup.usage() < UInt64(mark + (320 << 10)) {
                    step = try hog.hold(step.bytes + (32 << 10))
                    began = began ?? step.startNanoseconds
                }
                let stepsBegan = began ?? step.startNanoseconds
                // The kernel may give back a CPU's unused charge stock (up to 64 pages a CPU) when
                // another cgroup charges there (other suites run beside this one): usage then falls
                // back below the mark, and no warning is right. Such an attempt does not count.
                var warning: (event: LevelEvent, nanoseconds: UInt64)?
                try await waitUntil(within: .seconds(5), "no warning after a small crossing that stayed across the mark") {
                    warning = seen.withLock { $0.last { $0.event.level == .warning && $0.nanoseconds >= stepsBegan } }
                    return try warning != nil || cgroup.usage() < UInt64(mark)
                }
                if let warning { found.append((warning.event.source, max(0, Int64(warning.nanoseconds) - Int64(step.endNanoseconds)) / 1_000_000)) }
            }
            let byGuard = found.filter { $0.source == .usageSample }
            #expect(found.count >= 16, "too few crossings could be set up: \(found.count) in \(attempts) attempts")
            let fromUsage = found.allSatisfy { $0.source == .usageSample || $0.source == .usageThreshold }
            #expect(fromUsage, "\(found.map(\.source))")
            #expect(!byGuard.isEmpty, "the kernel reported every small crossing: the guard was not exercised (\(found.map(\.source)))")
            // Found within the band's wait (100 ms) and a second look 5 ms later, not a 1 s re-read.
            #expect(byGuard.allSatisfy { $0.milliseconds < 250 }, "\(byGuard.map(\.milliseconds)) ms")
        }
    }
}

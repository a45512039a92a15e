import CgroupKit
import Foundation
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

/// `inactive_page_cache = ignore` on a real cgroup: a file written from inside a 64 MiB cgroup
/// leaves its pages there as inactive page cache, which the kernel takes back first at the limit.
/// Left out, they raise no level; and anonymous memory that takes their place, while usage with
/// them stays pinned at the limit (no threshold of the kernel's is crossed again), is seen.
@Suite(.serialized, .tags(.cgroupV1), .needsRealCgroups)
struct InactivePageCacheMonitorTests {
    static let limit: UInt64 = 64 << 20

    /// Writes `mebibytes` of a file from a process in `cgroup` (charged there), flushed to disk so
    /// that its pages are clean inactive page cache; the file is removed when `body` ends.
    static func withPageCache<T>(_ mebibytes: Int, in cgroup: TestCgroup, _ body: () async throws -> T) async throws -> T {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("memwarn-page-cache-\(getpid())-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: file) }
        let written = try await ChildProcess.runOffThePool(
            ["/bin/dd", "if=/dev/zero", "of=\(file)", "bs=1M", "count=\(mebibytes)", "conv=fsync", "status=none"], in: cgroup, timeout: .seconds(120))
        try #require(written.status == 0, "dd: \(written.standardError)")
        return try await body()
    }

    static func monitor(in cgroup: TestCgroup, countingPageCache: Bool) -> PressureMonitor {
        var configuration = MonitorConfiguration(cgroupPath: cgroup.location.directory, environment: [:])
        configuration.watchesPressureStall = false
        configuration.policy.countsInactivePageCache = countingPageCache
        return PressureMonitor(configuration: configuration, logger: testLogger)
    }

    /// Runs `monitor`, recording its level events, until its first reading's level is in.
    static func run(_ monitor: PressureMonitor) async throws -> (events: Locked<[LevelEvent]>, running: Task<Void, any Error>) {
        let events = Locked<[LevelEvent]>([])
        monitor.addObserver { event in events.withLock { $0.append(event) } }
        let running = Task { try await monitor.run() }
        do {
            try await waitUntil(within: .seconds(10), "the first reading's level") { !events.withLock { $0.isEmpty } }
        } catch {
            running.cancel()
            throw error
        }
        return (events, running)
    }

    @Test func pageCacheLeftOutRaisesNoLevelWhereCountedItIsPastTheWarningMark() async throws {
        try await withTestCgroup(limit: Self.limit) { cgroup in
            try await Self.withPageCache(56, in: cgroup) {
                let reader = CgroupMemoryReader(location: cgroup.location)
                let inactive = try reader.inactiveFileBytes()
                try #require(inactive >= 40 << 20, "the written file's pages are inactive page cache in the cgroup (\(inactive) bytes)")
                for counting in [false, true] {
                    let monitor = Self.monitor(in: cgroup, countingPageCache: counting)
                    let (events, running) = try await Self.run(monitor)
                    defer { running.cancel() }
                    let first = try #require(events.withLock { $0.first })
                    let own = try #require(first.snapshot.constraints.first)
                    if counting {
                        #expect(own.inactiveFileBytes == nil)
                        #expect(first.level != .normal, "counted, the page cache is past the warning mark: \(own.usageBytes) of \(Self.limit)")
                    } else {
                        #expect((own.inactiveFileBytes ?? 0) >= 40 << 20, "\(own)")
                        #expect(own.usageBytes < Self.limit / 2, "usage less the page cache: \(own.usageBytes)")
                        #expect(first.level == .normal)
                        #expect(monitor.watchedSources.contains { $0.contains("less the total_inactive_file line") }, "\(monitor.watchedSources)")
                    }
                    running.cancel()
                    _ = try? await running.value
                }
            }
        }
    }

    @Test func anonymousMemoryTakingThePageCachesPlaceIsSeen() async throws {
        try await withTestCgroup(limit: Self.limit) { cgroup in
            try await Self.withPageCache(56, in: cgroup) {
                let hog = try MemoryHog(in: cgroup)
                defer { hog.terminate() }
                let monitor = Self.monitor(in: cgroup, countingPageCache: false)
                let (events, running) = try await Self.run(monitor)
                defer { running.cancel() }
                #expect(events.withLock { $0.first?.level } == .normal)
                // As root, once the kernel's thresholds are in: they count the page cache, so where
                // it hides a mark usage less it is sampled beside them, not only in the bands.
                if geteuid() == 0 { try await waitForUsageThresholds(monitor) }
                // Usage with the page cache stays at the limit while the kernel reclaims it for
                // the hog's anonymous memory: only usage less the page cache moves, past the
                // warning mark (the hog's own pages come on top of what it holds).
                let mark = Double(Self.limit) * 0.8
                _ = try await hog.hold(Int(Double(Self.limit) * 0.84), within: .seconds(60))
                try await waitUntil(within: .seconds(30), "a raised level once anonymous memory took the page cache's place") {
                    events.withLock { $0.contains { $0.level != .normal && Double($0.snapshot.usageBytes) >= mark } }
                }
                #expect(try CgroupMemoryReader(location: cgroup.location).events().oomKill == 0, "the hog lived")
            }
        }
    }
}

/// cgroup v1 as root, page cache left out, on a manual clock: the kernel's usage thresholds count
/// the page cache, so they still stand in for reads while usage with it is far below the marks;
/// once page cache fills the cgroup past the marks' guards (hiding them: usage less it is far
/// below), usage less it is read by the rule.
@Suite(.serialized, .tags(.root, .cgroupV1), .needsRealCgroups)
struct InactivePageCacheGuardTests {
    @Test func farBelowTheMarksNothingIsReadAndWherePageCacheHidesAMarkUsageLessItIs() async throws {
        try await withTestCgroup(limit: InactivePageCacheMonitorTests.limit) { cgroup in
            var policy = PressurePolicy()
            policy.countsInactivePageCache = false
            let engine = try DrivenEngine(files: .host, policy: policy, cgroupPath: cgroup.location.directory)
            try engine.start()
            try engine.turn(until: { engine.usageWatch == .thresholds }, "the usage thresholds registered")
            let quiet = engine.samples.value
            for _ in 0..<100 { try engine.advance(by: .milliseconds(100)) }
            #expect(engine.samples.value == quiet, "\(engine.samples.value - quiet) reads in 10 s far below the marks")
            try await InactivePageCacheMonitorTests.withPageCache(56, in: cgroup) {
                // The kernel reports usage with the page cache crossing its thresholds: a full reading.
                let decided = engine.decisions.value
                try engine.turn(until: { engine.decisions.value > decided }, "a reading after the page cache crossed the thresholds")
                let before = engine.samples.value
                for _ in 0..<100 { try engine.advance(by: .milliseconds(100)) }
                #expect(engine.samples.value - before >= 10, "\(engine.samples.value - before) reads in 10 s with the marks hidden")
                #expect(engine.level == .normal, "usage less the page cache is far below the marks")
            }
        }
    }
}

import CgroupKit
import MemwarnControl
import MemwarnMonitor
import MemwarnRelease
import MemwarnSystem
import MemwarnTestFixtures
import MemwarnTestKit
import Testing

@testable import MemwarnAgent

#if canImport(Glibc)
import Glibc
#endif

/// The node agent on a manual clock (``DrivenAgent``): a pod of plain files (a parent `/pod` of
/// 256 MiB, this process's service in `/pod/app`), the service's real control endpoint, and the
/// agent's engine, roster and rounds turned on the test's thread.
struct DrivenAgentTests {
    static let mebibyte: UInt64 = 1 << 20

    static func withService(_ consumer: CacheFixtures.FakeConsumer, _ body: @escaping (SharedParentHost, String) async throws -> Void) async throws {
        try await PodService.run(consumer) { host, directory, _ in try await body(host, directory) }
    }

    static let parent = PodService.parent

    /// A parent that stays past its warning mark, and a service that says it holds 64 MiB (more
    /// than the parent needs) but frees nothing when asked: each ask is lean, and the wait before
    /// the next doubles — asked at the crossing, then 0.5, 1, 2 and 4 s after each lean answer, by
    /// the clock. (The agent asked again 20 ms after every round: 500 asks in these 10 s.)
    @Test(.timeLimit(.minutes(1))) func leanAsksAreSpacedOutByTheClock() async throws {
        let stuck = CacheFixtures.FakeConsumer("stuck", tier: .caches, footprint: Int(64 * Self.mebibyte), releasesAtMost: 0)
        try await Self.withService(stuck) { host, directory in
            let agent = try DrivenAgent(files: host.files, parent: Self.parent, controlDirectory: directory)
            try agent.start()
            try agent.turn(until: { agent.roster.entries[getpid()]?.holding != nil }, "the service found, its status read")
            let crossedAt = agent.clock.now
            try host.setUsage(parent: 218 * Self.mebibyte, app: 40 * Self.mebibyte)
            var askedAt: [Duration] = []
            var seen = 0
            while agent.clock.now - crossedAt < .seconds(10) {
                try agent.advance(by: .milliseconds(10))
                let asks = agent.records("ask")
                for _ in seen..<asks.count { askedAt.append(agent.clock.now - crossedAt) }
                seen = asks.count
            }
            let gaps = zip(askedAt.dropFirst(), askedAt).map { ($0 - $1).wholeMilliseconds }
            #expect(askedAt.count == 5, "asked at \(askedAt)")
            #expect(gaps == [500, 1_000, 2_000, 4_000], "the waits between asks: \(gaps) ms")
            #expect(stuck.requests.count == askedAt.count, "\(stuck.requests.count) releases for \(askedAt.count) asks")
            #expect(agent.records("crossing").count == 1 && agent.records("relieved").isEmpty)
        }
    }

    /// The parent past its warning mark by memory its service does not hold: the service says it
    /// holds nothing, so it is not asked; the agent says so once, and asks nobody over 30 s of the
    /// clock (the agent asked about 45 times a second).
    /// The parent past its warning mark by memory its service does not hold, the service holding
    /// a 20 MiB cache of the 39 MiB the parent needs: asked once, then the agent says nobody can
    /// relieve the parent and asks no more over 30 s of the clock, though the cache says it holds
    /// 20 MiB at every refresh.
    @Test(.timeLimit(.minutes(1))) func aServiceThatCannotRelieveTheParentIsAskedOnce() async throws {
        let cache = CacheFixtures.FakeConsumer("cache", tier: .caches, footprint: Int(20 * Self.mebibyte), releasesAtMost: 0)
        try await Self.withService(cache) { host, directory in
            let agent = try DrivenAgent(files: host.files, parent: Self.parent, controlDirectory: directory)
            try agent.start()
            try agent.turn(until: { agent.roster.entries[getpid()]?.holding != nil }, "the service found, its status read")
            try host.setUsage(parent: 218 * Self.mebibyte, app: 40 * Self.mebibyte)
            for _ in 0..<300 { try agent.advance(by: .milliseconds(100)) }
            #expect(agent.records("ask").count == 1 && cache.requests.count == 1, "\(agent.records("ask"))")
            #expect(agent.records("unrelievable").count == 1, "\(agent.records("unrelievable"))")
        }
    }

    @Test(.timeLimit(.minutes(1))) func aServiceWithNothingToGiveIsNotAskedAndTheAgentSaysWhy() async throws {
        let empty = CacheFixtures.FakeConsumer("empty", tier: .caches, footprint: 0)
        try await Self.withService(empty) { host, directory in
            let agent = try DrivenAgent(files: host.files, parent: Self.parent, controlDirectory: directory)
            try agent.start()
            try agent.turn(until: { agent.roster.entries[getpid()]?.holding != nil }, "the service found, its status read")
            try host.setUsage(parent: 218 * Self.mebibyte, app: 40 * Self.mebibyte)
            for _ in 0..<300 { try agent.advance(by: .milliseconds(100)) }
            #expect(agent.records("ask").isEmpty && empty.requests.isEmpty, "\(agent.records("ask"))")
            let said = agent.records("unrelievable")
            #expect(said.count == 1, "\(said)")
            #expect(said.first?.heldElsewhereBytes == 178 * Self.mebibyte && said.first?.canGiveBytes == 0, "\(said)")
            // The siblings let go: the press ends, under the recovery mark.
            try host.setUsage(parent: 120 * Self.mebibyte, app: 40 * Self.mebibyte)
            try agent.advance(by: .seconds(1))
            #expect(agent.records("relieved").count == 1)
        }
    }

    /// With inactive page cache left out (`inactive_page_cache = ignore`), a service is measured
    /// as the parent is: the parent's 230 MiB less its 10 MiB of page cache is past the warning
    /// mark, the service's 40 MiB less the same 10 MiB (its own) is 30 MiB, and 190 MiB are held
    /// by no service (with the service's page cache counted, 180).
    @Test(.timeLimit(.minutes(1))) func aServiceIsMeasuredAsTheParentIsWithPageCacheLeftOut() async throws {
        let empty = CacheFixtures.FakeConsumer("empty", tier: .caches, footprint: 0)
        try await Self.withService(empty) { host, directory in
            var policy = PressurePolicy()
            policy.countsInactivePageCache = false
            try host.setInactivePageCache(parent: 10 * Self.mebibyte, app: 10 * Self.mebibyte)
            let agent = try DrivenAgent(files: host.files, parent: Self.parent, controlDirectory: directory, policy: policy)
            try agent.start()
            try agent.turn(until: { agent.roster.entries[getpid()]?.holding != nil }, "the service found, its status read")
            try host.setUsage(parent: 230 * Self.mebibyte, app: 40 * Self.mebibyte)
            for _ in 0..<50 where agent.records("unrelievable").isEmpty { try agent.advance(by: .milliseconds(100)) }
            let said = agent.records("unrelievable")
            #expect(said.count == 1, "\(said)")
            #expect(said.first?.parentUsageBytes == 220 * Self.mebibyte, "\(said)")
            #expect(said.first?.heldElsewhereBytes == 190 * Self.mebibyte, "\(said)")
        }
    }
}

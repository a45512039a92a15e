import CgroupKit
import Foundation
import MemwarnTestKit
import MemwarnTestTraits
import Testing

/// A real service-like child (`memwarn-release-probe`) under a real 256 MiB cgroup: three
/// caches (60, 40, 20 MiB), a media store (4 + 2 + 1 MiB decoded) and a pool of four 2 MiB
/// connections. Releases must follow the documented order and really give memory back.
@Suite(.serialized, .tags(.root, .cgroupV1), .needsRealCgroups)
struct ReleaseIntegrationTests {
    static let limit: UInt64 = 256 << 20
    static let mebibyte = 1 << 20

    static func probe(in cgroup: TestCgroup) throws -> JSONLineChild {
        try JSONLineChild([ChildProcess.productsDirectory + "/memwarn-release-probe"], in: cgroup)
    }

    static func entries(_ report: [String: Any]) throws -> [(consumer: String, tier: String, freed: Int, before: Int)] {
        try #require(report["entries"] as? [[String: Any]]).map {
            ($0["consumer"] as? String ?? "", $0["tier"] as? String ?? "", $0["bytesFreed"] as? Int ?? -1, $0["bytesBefore"] as? Int ?? -1)
        }
    }

    @Test func aWarningReleasesCachesLargestFirstThenMediaStopsAtTheTargetAndUsageDrops() async throws {
        try await withTestCgroup(limit: Self.limit) { cgroup in
            let probe = try Self.probe(in: cgroup)
            defer { probe.stop() }
            let loaded = try #require(try probe.send("load")["footprints"] as? [String: Int])
            #expect(loaded["sessions"] == 60 * Self.mebibyte && loaded["thumbnails"] == 40 * Self.mebibyte && loaded["fragments"] == 20 * Self.mebibyte)
            #expect(loaded["media"] == 7 * Self.mebibyte && loaded["connections"] == 8 * Self.mebibyte)

            let target = 124 * Self.mebibyte
            let before = try cgroup.usage()
            let report = try probe.send("release warning \(target)")
            let after = try cgroup.usage()
            let entries = try Self.entries(report)

            #expect(entries.map(\.consumer) == ["sessions", "thumbnails", "fragments", "media"])
            #expect(entries.map(\.tier) == ["caches", "caches", "caches", "media"])
            #expect(!entries.contains { $0.tier == "shared-resources" }, "a warning never closes shared resources")
            let freed = try #require(report["freedBytes"] as? Int)
            #expect(freed >= target)
            #expect(freed - entries.last!.freed < target, "the last consumer was needed: release stopped at the target")
            #expect(entries.last!.freed < entries.last!.before, "media gave only what was still wanted")
            #expect(report["trimmedHeap"] as? Bool == true)
            let dropped = Int(before) - Int(after)
            #expect(Double(dropped) >= 0.8 * Double(freed), "usage fell \(dropped) bytes for \(freed) reported freed")
        }
    }

    @Test func criticalAlsoClosesIdleConnectionsAfterTheOtherTiers() async throws {
        try await withTestCgroup(limit: Self.limit) { cgroup in
            let probe = try Self.probe(in: cgroup)
            defer { probe.stop() }
            _ = try probe.send("load")
            let before = try cgroup.usage()
            let report = try probe.send("release critical \(Int.max)")
            let after = try cgroup.usage()
            let entries = try Self.entries(report)
            #expect(entries.map(\.consumer) == ["sessions", "thumbnails", "fragments", "media", "connections"])
            #expect(entries.last?.freed == 8 * Self.mebibyte)
            let freed = try #require(report["freedBytes"] as? Int)
            #expect(freed == 135 * Self.mebibyte)
            #expect(Double(Int(before) - Int(after)) >= 0.8 * Double(freed))
        }
    }

    @Test func theMonitorsWarningReleasesOnItsOwnUntilUsageIsBelowTheRecoveryMark() async throws {
        try await withTestCgroup(limit: Self.limit) { cgroup in
            let probe = try Self.probe(in: cgroup)
            defer { probe.stop() }
            _ = try probe.send("load")
            #expect(try probe.send("watch")["watching"] as? String == "normal")
            // Unreleasable ballast pushes usage over the warning mark (80 %).
            let ballast = Int(Double(Self.limit) * 0.84) - Int(try cgroup.usage())
            // The automatic release and the reply to "ballast" arrive in either order.
            let replies = [try probe.send("ballast \(ballast)"), try probe.receive()]
            let report = try #require(replies.first { $0["entries"] != nil })
            #expect(replies.contains { $0["ballast"] != nil })
            #expect(report["level"] as? String == "warning")
            let entries = try Self.entries(report)
            #expect(entries.first?.consumer == "sessions", "the largest cache goes first")
            #expect(report["metTarget"] as? Bool == true)
            let target = try #require(report["targetBytes"] as? Int)
            #expect(target > 0)
            #expect(!entries.contains { $0.tier == "shared-resources" })
            #expect(Double(try cgroup.usage()) < Double(Self.limit) * 0.8, "usage is back below the warning mark")
        }
    }
}

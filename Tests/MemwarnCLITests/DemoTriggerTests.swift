import CgroupKit
import Foundation
import MemwarnTestKit
import MemwarnTestTraits
import Testing

/// `memwarn trigger` against the demo service itself (`memwarn-demo`, the soak's subject):
/// its report follows the documented tiers, and the largest consumer of each tier goes first.
@Suite(.serialized, .tags(.root, .cgroupV1), .needsRealCgroups)
struct DemoTriggerTests {
    static let demo = ChildProcess.productsDirectory + "/memwarn-demo"
    static let tierOrder = ["discarded", "caches", "media", "shared-resources", "suspended-units"]

    @Test func aCriticalTriggerReleasesTheDemoInTierOrderLargestFirstAndTerminatesOnlySuspendedSessions() async throws {
        let runtime = TriggerCommandTests.Runtime()
        defer { runtime.remove() }
        // Roomy: the demo's own monitor releases nothing on its own during the test.
        try await withTestCgroup(limit: 2 << 30) { cgroup in
            let dataDirectory = runtime.directory + "/demo-data"  // removed with the runtime directory
            let demo = try LineChild([Self.demo, "--duration", "60", "--data-dir", dataDirectory], in: cgroup, environment: runtime.environment)
            defer {
                demo.killIfRunning()  // the demo we started
                _ = try? demo.waitForExit()
            }
            let pid = demo.pid
            // Wait, on the demo's own progress events, until sessions have been suspended.
            var progress: [String: Any] = [:]
            while (progress["suspended"] as? Int ?? 0) < 3 {
                progress = try #require(try JSONSerialization.jsonObject(with: Data(demo.nextLine(timeout: .seconds(30)).utf8)) as? [String: Any])
            }
            let result = try runtime.trigger(["--pid", "\(pid)", "--level", "critical", "--json"])
            #expect(result.status == 0, "\(result.standardError)")
            let reply = try #require(try JSONSerialization.jsonObject(with: Data(result.standardOutput.utf8)) as? [String: Any])
            let entries = try #require((reply["report"] as? [String: Any])?["entries"] as? [[String: Any]])
            let tiers = entries.compactMap { $0["tier"] as? String }
            let ranks = tiers.compactMap { Self.tierOrder.firstIndex(of: $0) }
            #expect(ranks.count == entries.count && ranks == ranks.sorted(), "tiers in the documented order: \(tiers)")
            for tier in Set(tiers) {
                let sizes = entries.filter { $0["tier"] as? String == tier }.compactMap { $0["bytesBefore"] as? Int }
                #expect(sizes == sizes.sorted(by: >), "largest first within \(tier): \(sizes)")
            }
            #expect(entries.first?["consumer"] as? String == "renders", "the render cache is the largest consumer of all")
            #expect(tiers.contains("media") && tiers.contains("shared-resources"))
            let terminated = entries.filter { $0["tier"] as? String == "suspended-units" }
            #expect(!terminated.isEmpty, "critical also terminates suspended sessions")
            #expect(terminated.allSatisfy { ($0["consumer"] as? String)?.hasPrefix("unit user-") == true && ($0["bytesFreed"] as? Int ?? 0) > 0 })
        }
    }
}

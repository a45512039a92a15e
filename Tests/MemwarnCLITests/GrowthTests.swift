import Foundation
import MemwarnTestKit
import MemwarnTestTraits
import Testing

extension RunCommandTests {
    /// A service written as the README teaches (`memwarn-growth-probe`: the default policy, a
    /// monitor in a ServiceGroup, the shared coordinator attached, one unlimited cache of 1 MiB
    /// entries) run under `memwarn run --memory-max 128M`, as an operator would run it. Nested in
    /// the `memwarn run` suite, which is serialized: its check that no `memwarn-run-` cgroup is
    /// left must not see these runs' live ones.
    @Suite(.serialized, .tags(.root, .cgroupV1), .needsRealCgroups)
    struct GrowthTests {
        static let memwarn = ChildProcess.productsDirectory + "/memwarn"
        static let probe = ChildProcess.productsDirectory + "/memwarn-growth-probe"

        struct Run {
            var status: Int32
            var events: [[String: Any]]
            var standardError: String
            func all(_ name: String) -> [[String: Any]] { events.filter { $0["event"] as? String == name } }
            var done: [String: Any]? { all("done").first }
        }

        static func run(_ probeArguments: [String]) throws -> Run {
            let result = try ChildProcess.run([memwarn, "run", "--memory-max", "128M", "--", probe] + probeArguments)
            let events = result.standardOutput.split(separator: "\n").compactMap {
                try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
            }
            return Run(status: result.status, events: events, standardError: result.standardError)
        }

        @Test(arguments: [25, 100])
        func aServiceOnTheDefaultPolicySurvives512MiBOfInsertsUnder128MiB(rate: Int) throws {
            let run = try Self.run(["--rate", "\(rate)", "--total", "512"])
            #expect(run.status == 0, "exit \(run.status): \(run.standardError)")
            #expect(run.done?["inserted"] as? Int == 512)
            let releases = run.all("release").filter { ($0["freed"] as? Int ?? 0) > 0 }
            // 512 MiB through 128 MiB: usage came back to the warning mark again and again while
            // the level stayed raised, and was released each time.
            #expect(releases.count >= 10, "only \(releases.count) releases freed memory")
            let risesToRaised = run.all("level").filter { ($0["level"] as? String) != "normal" }.count
            #expect(releases.count > risesToRaised, "releases happened only on rises (\(risesToRaised))")
            #expect(releases.contains { ($0["headroom"] as? Int ?? 0) > 0 }, "no release sized headroom for the growth")
        }

        @Test func theReleaseThatWaitedForARiseIsOOMKilledAtTheSameRate() throws {
            let run = try Self.run(["--rate", "100", "--total", "512", "--releaser", "rise-only"])
            #expect(run.status == 137, "the old rise-only release survived: the survival test would prove nothing")
        }

        /// Half of every insert cached as `PurgeableData` that was never ended
        /// (`endContentAccess()`: it starts accessed) — asked at every release, it gave back nothing,
        /// and nothing said who held the floor. The releases and the exhausted event now name it.
        @Test func contentLeftAccessedIsNamedAsInUseByTheReleasesAndTheExhaustedEvent() throws {
            let run = try Self.run(["--rate", "50", "--total", "512", "--pinned", "0.5", "--shed"])
            #expect(run.status == 0, "exit \(run.status): \(run.standardError)")
            let inUse = run.all("release").compactMap { ($0["inUse"] as? [String: Int])?["pinned"] }
            #expect(!inUse.isEmpty && inUse.allSatisfy { $0 > 0 }, "the releases that asked the pinned cache say what it holds in use: \(inUse)")
            let exhausted = try #require(run.all("exhausted").first, "no exhausted event")
            let held = try #require(exhausted["heldInUse"] as? Int)
            let holders = try #require(exhausted["holders"] as? [String: Int])
            #expect(held > 64 << 20, "most of the 128 MiB is the pinned cache's: \(held)")
            #expect(
                holders.max { $0.value < $1.value }?.key == "pinned" && Double(holders["pinned"] ?? 0) >= 0.9 * Double(held),
                "the pinned cache holds nearly all (the other only what was inserted since the release): \(holders)")
        }

        @Test func whenOnlyUnreleasableMemoryIsLeftExhaustionIsReportedAndSheddingLoadSurvives() throws {
            // Half of every insert is held outside any cache: the floor climbs until nothing is left to give.
            let shedding = try Self.run(["--rate", "50", "--total", "512", "--unreleasable", "0.5", "--shed"])
            #expect(shedding.status == 0, "exit \(shedding.status): \(shedding.standardError)")
            let exhausted = try #require(shedding.all("exhausted").first, "no exhausted event")
            let floor = try #require(exhausted["floor"] as? Int)
            #expect(Double(floor) >= 0.9 * Double(128 << 20), "the floor (\(floor)) is usage still at the critical mark")
            #expect((shedding.done?["shed"] as? Int ?? 0) > 0, "the service refused no work while exhausted")

            let ignoring = try Self.run(["--rate", "50", "--total", "512", "--unreleasable", "0.5"])
            #expect(ignoring.status == 137, "the service that ignored exhaustion was not killed (exit \(ignoring.status))")
            #expect(!ignoring.all("exhausted").isEmpty, "it was told before it was killed")
        }
    }
}

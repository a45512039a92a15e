import Foundation
import MemwarnTestKit
import MemwarnTestTraits
import Testing

extension RunCommandTests {
    /// The README's service (`memwarn-growth-probe`) under `memwarn run --memory-max 128M` on every
    /// path a host gives it: run as an ordinary user (`setpriv` to nobody), whose monitor may not
    /// register cgroup v1 thresholds and samples usage — the path of cgroup v2 and of hosts without
    /// a limit too —, and as root from its first instruction, before the thresholds are registered.
    /// Nested in the serialized `memwarn run` suite (its leftover check must not see these runs).
    @Suite(.serialized, .tags(.root, .cgroupV1), .needsRealCgroups)
    struct SamplingSurvivalTests {

        /// `environment` is added to this process's (the policy's `MEMWARN_*` keys reach the probe).
        static func run(_ probeArguments: [String], asNobody: Bool, environment: [String: String] = [:]) throws -> GrowthTests.Run {
            let command =
                [GrowthTests.memwarn, "run", "--memory-max", "128M", "--"] + (asNobody ? ChildProcess.asNobody : []) + [GrowthTests.probe] + probeArguments
            let inherited = ProcessInfo.processInfo.environment.merging(environment) { $1 }
            let result = try ChildProcess.run(command, environment: inherited.map { "\($0.key)=\($0.value)" })
            let events = result.standardOutput.split(separator: "\n").compactMap {
                try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
            }
            return GrowthTests.Run(status: result.status, events: events, standardError: result.standardError)
        }

        @Test(arguments: [100, 400])
        func anOrdinaryUsersServiceSamplesUsageAndSurvives512MiBOfInsertsUnder128MiB(rate: Int) throws {
            let run = try Self.run(["--rate", "\(rate)", "--total", "512"], asNobody: true)
            #expect(run.status == 0, "exit \(run.status): \(run.standardError)")
            #expect(run.done?["inserted"] as? Int == 512)
            let armed = try #require(run.all("armed").first, "no armed line")
            #expect(armed["usageWatch"] as? String == "adaptive-sampling", "\(armed)")
            #expect(armed["pendingThresholds"] as? Int == 0, "nobody may not register thresholds: \(armed)")
            let releases = run.all("release").filter { ($0["freed"] as? Int ?? 0) > 0 }
            #expect(releases.count >= 10, "only \(releases.count) releases freed memory")
            let sources = Set(run.all("level").compactMap { $0["source"] as? String })
            #expect(sources.isSubset(of: ["initial", "usage-sample", "poll", "recheck", "forecast"]), "\(sources)")
            #expect(sources.contains("usage-sample"), "no level came from adaptive sampling: \(sources)")
        }

        @Test func theSameServiceWithAFixedOneSecondPollIsOOMKilled() throws {
            // worst_case_growth = 0 turns adaptive sampling off: the poll every second that ordinary
            // users, cgroup v2 and hosts without a limit had before. It shows the test above can fail.
            let run = try Self.run(["--rate", "100", "--total", "512"], asNobody: true, environment: ["MEMWARN_WORST_CASE_GROWTH": "0"])
            #expect(run.status == 137, "a service sampled once a second survived 100 MiB/s: exit \(run.status)")
            #expect(run.all("armed").first?["usageWatch"] as? String == "polling")
        }

        @Test func asRootItSurvivesGrowthAtAGibibyteASecondFromItsFirstInstruction() throws {
            // The load starts as the service starts, with the usage thresholds still being registered
            // (each takes the kernel an RCU grace period): adaptive sampling covers that time.
            let run = try Self.run(["--rate", "1024", "--total", "512"], asNobody: false)
            #expect(run.status == 0, "exit \(run.status): \(run.standardError)")
            #expect(run.done?["inserted"] as? Int == 512)
            let armed = try #require(run.all("armed").first, "no armed line")
            #expect(armed["usageWatch"] as? String == "adaptive-sampling" && (armed["pendingThresholds"] as? Int ?? 0) > 0, "\(armed)")
            #expect(run.all("release").filter { ($0["freed"] as? Int ?? 0) > 0 }.count >= 10)
        }
    }
}

import CgroupKit
import Foundation
import MemwarnTestKit
import MemwarnTestTraits
import Testing

extension RunCommandTests {
    /// Services that share a parent cgroup's limit, on real cgroups: each memwarn service
    /// (`memwarn-growth-probe`, written as the README teaches, with a control endpoint) in a child
    /// cgroup of its own with no limit, the parent limited. The binding limit is the parent's; the
    /// node agent (`memwarn agent`) coordinates who gives memory back. Serialized, and nested in the
    /// serialized `memwarn run` suite: every test drives a 256-320 MiB parent to its marks with three
    /// growing services, which beside the growth tests' 1 GiB/s service would measure each other.
    @Suite(.serialized, .tags(.root, .cgroupV1), .needsRealCgroups)
    struct SharedLimitTests {
        static let memwarn = ChildProcess.productsDirectory + "/memwarn"
        static let mebibyte: UInt64 = 1 << 20

        // MARK: The binding ancestor

        @Test func statusNamesALimitedParentAsBindingForAChildWithoutALimit() async throws {
            try await withTestCgroup(limit: 256 * Self.mebibyte) { parent in
                let holder = try parent.child("holder")
                let idle = try parent.child("idle")
                defer {
                    MemoryHog.terminateAll(in: holder)
                    try? idle.remove()
                    try? holder.remove()
                }
                let hog = try MemoryHog(in: holder)
                try hog.hold(Int(216 * Self.mebibyte))
                let status = try ChildProcess.run([Self.memwarn, "status", "--json", "--cgroup", idle.location.path])
                let report = try #require(try JSONSerialization.jsonObject(with: Data(status.standardOutput.utf8)) as? [String: Any], "\(status.standardError)")
                #expect(report["limitCgroup"] as? String == parent.location.path, "\(report)")
                #expect(report["level"] as? String == "warning", "216 MiB of 256 is 84 %: \(report)")
                #expect((report["cgroupUsageBytes"] as? UInt64 ?? .max) < 4 * Self.mebibyte, "the child itself holds nothing: \(report)")
                #expect((report["usageBytes"] as? UInt64 ?? 0) >= 216 * Self.mebibyte, "usage is the parent's, the sibling's included")
                let limits = try #require(report["limits"] as? [[String: Any]])
                #expect(limits.count == 1 && limits[0]["binding"] as? Bool == true && limits[0]["cgroup"] as? String == parent.location.path, "\(limits)")

                let text = try ChildProcess.run([Self.memwarn, "status", "--cgroup", idle.location.path])
                #expect(text.standardOutput.contains("binds     \(parent.location.path):"), "\(text.standardOutput)")
                #expect(text.standardOutput.contains("an ancestor's limit binds"), "\(text.standardOutput)")

                // ancestor_limits = ignore: the child's own limit alone (none), so the system's memory.
                let ignoring = try ChildProcess.run(
                    [Self.memwarn, "status", "--json", "--cgroup", idle.location.path],
                    environment: ["MEMWARN_ANCESTOR_LIMITS=ignore"])
                let own = try #require(
                    try JSONSerialization.jsonObject(with: Data(ignoring.standardOutput.utf8)) as? [String: Any], "\(ignoring.standardError)")
                #expect(own["measure"] as? String == "system" && own["level"] as? String == "normal", "\(own)")
            }
        }

        @Test func theLimitWithTheLeastHeadroomBindsNotTheSmallest() async throws {
            // A child limited to 200 MiB under a 256 MiB parent: with the sibling holding 150 MiB the
            // parent has 106 MiB left, the child's own limit 200: the parent binds, though its limit
            // is larger. With the sibling gone, the child's own limit binds again.
            try await withTestCgroup(limit: 256 * Self.mebibyte) { parent in
                let sibling = try parent.child("sibling")
                let limited = try parent.child("limited", settings: [("memory.limit_in_bytes", "\(200 * Self.mebibyte)")])
                defer {
                    MemoryHog.terminateAll(in: sibling)
                    try? limited.remove()
                    try? sibling.remove()
                }
                let own = try MemoryHog(in: limited)
                try own.hold(Int(40 * Self.mebibyte))
                let hog = try MemoryHog(in: sibling)
                try hog.hold(Int(150 * Self.mebibyte))
                let both = try CgroupMemoryReader(location: limited.location).constraints()
                #expect(both.map(\.cgroupPath) == [limited.location.path, parent.location.path], "nearest first: \(both)")
                #expect(MemoryConstraint.binding(both)?.cgroupPath == parent.location.path, "\(both)")
                try hog.hold(0)
                let after = try CgroupMemoryReader(location: limited.location).constraints()
                #expect(MemoryConstraint.binding(after)?.cgroupPath == limited.location.path, "\(after)")
                #expect(try CgroupMemoryReader(location: limited.location).constraints(includingAncestors: false).map(\.cgroupPath) == [limited.location.path])
                own.terminate()
            }
        }

        // MARK: (a) A service beside a sibling that does not link memwarn

        static func besideASibling(_ parent: TestCgroup) -> SharedParentTrial {
            var trial = SharedParentTrial(parent: parent, services: [.init(name: "service", rateMiB: 40, totalMiB: 170)])
            trial.sibling = ("sibling", 100)
            return trial
        }

        @Test func aServiceBesideAnUnlinkedSiblingReleasesInTimeAndSurvives() async throws {
            try await withTestCgroup(limit: 256 * Self.mebibyte) { parent in
                let outcome = try await Self.besideASibling(parent).run(.alone)
                let service = try #require(outcome.services.first)
                #expect(service.survived, "exit \(service.status): \(service.standardError)")
                #expect(service.all("release").contains { ($0["freed"] as? Int ?? 0) > 0 }, "it never released: \(service.events)")
                #expect(service.all("level").contains { $0["level"] as? String != "normal" }, "the parent's limit never raised its level")
            }
        }

        @Test func seeingOnlyItsOwnLimitTheSameServiceIsKilledByTheParentsLimit() async throws {
            // The counterfactual, to show the test above can fail: ancestor_limits = ignore.
            try await withTestCgroup(limit: 256 * Self.mebibyte) { parent in
                let outcome = try await Self.besideASibling(parent).run(.ownLimitOnly)
                let service = try #require(outcome.services.first)
                #expect(!service.survived, "a service blind to the parent's limit survived: \(service.events.suffix(3))")
            }
        }

        // MARK: (b) Three services, one parent, with the agent and without

        static func threeServices(_ parent: TestCgroup) -> SharedParentTrial {
            // 150 + 90 + 45 MiB of inserts (and ~15 MiB of runtime each) under 256 MiB: their sum
            // does not fit; the largest's cache alone is enough to give back.
            SharedParentTrial(
                parent: parent,
                services: [
                    .init(name: "large", rateMiB: 60, totalMiB: 150), .init(name: "medium", rateMiB: 30, totalMiB: 90),
                    .init(name: "small", rateMiB: 12, totalMiB: 45),
                ])
        }

        /// What the agent promises, on any machine: every round asks in the order of the kernel's
        /// usage (largest first, each ask as its round ranked it), the parent is relieved, nobody is
        /// killed. How far down the order a round goes depends on how fast growth outpaces the
        /// releases (a loaded machine's asks are slower), so it is not asserted.
        static func expectTheAgentsPromise(_ outcome: SharedParentTrial.Outcome, _ parent: TestCgroup) {
            for service in outcome.services { #expect(service.survived, "\(service.name): exit \(service.status): \(service.standardError)") }
            let asks = outcome.agent("ask")
            #expect(!asks.isEmpty && !outcome.agent("relieved").isEmpty, "the agent never asked: \(outcome.agentRecords) \(outcome.agentStandardError)")
            var order: [[String: Any]] = []
            for record in outcome.agentRecords {
                if record["event"] as? String == "round", let next = record["order"] as? [[String: Any]] {
                    order = next
                    let sizes = next.map { $0["usageBytes"] as? UInt64 ?? 0 }
                    #expect(sizes == sizes.sorted(by: >), "\(next)")
                } else if record["event"] as? String == "ask", let rank = record["rank"] as? Int {
                    #expect(rank <= order.count && order[rank - 1]["cgroup"] as? String == record["cgroup"] as? String, "\(record) against \(order)")
                }
            }
            // Told and measured are both reported; the measured bytes come from the kernel.
            #expect(asks.allSatisfy { $0["measuredFreedBytes"] != nil && $0["reportedFreedBytes"] != nil }, "\(asks)")
            #expect(asks.contains { ($0["measuredFreedBytes"] as? Int ?? 0) > 0 }, "no ask freed anything the kernel could see: \(asks)")
        }

        @Test func withTheAgentAllSurviveAndEveryRoundAsksInTheKernelsOrder() async throws {
            try await withTestCgroup(limit: 256 * Self.mebibyte) { parent in
                let outcome = try await Self.threeServices(parent).run(.agent)
                #expect(outcome.agent("found").count == 3, "\(outcome.agentRecords)")
                Self.expectTheAgentsPromise(outcome, parent)
                let firstOrder = outcome.agent("round").first?["order"] as? [[String: Any]]
                #expect(firstOrder?.first?["cgroup"] as? String == parent.location.path + "/large", "\(String(describing: firstOrder))")
            }
        }

        // MARK: (b2) Never worse than no agent: fast growth, a busy CPU

        /// Three services written as the README teaches, growing at 400, 300 and 200 MiB/s to
        /// 800, 600 and 400 MiB under a 384 MiB parent, with two busy loops beside them on this 2-core machine, where the
        /// agent used to lose 1–3 of 6 services and the services on their own lost none.
        static func fastServices(_ parent: TestCgroup) -> SharedParentTrial {
            var trial = SharedParentTrial(
                parent: parent,
                services: [
                    .init(name: "large", rateMiB: 400, totalMiB: 800), .init(name: "medium", rateMiB: 300, totalMiB: 600),
                    .init(name: "small", rateMiB: 200, totalMiB: 400),
                ])
            trial.cpuHogs = 2
            return trial
        }

        @Test func onABusyCPUWithFastGrowthTheAgentIsNoWorseThanEachServiceOnItsOwn() async throws {
            let alone = try await withTestCgroup(limit: 384 * Self.mebibyte) { parent in try await Self.fastServices(parent).run(.alone) }
            let agent = try await withTestCgroup(limit: 384 * Self.mebibyte) { parent in try await Self.fastServices(parent).run(.agent) }
            let survivedAlone = alone.services.filter(\.survived).count
            let survivedWithAgent = agent.services.filter(\.survived).count
            #expect(
                survivedWithAgent >= survivedAlone,
                "with the agent \(survivedWithAgent) of 3 survived, each on its own \(survivedAlone): \(agent.agentRecords.suffix(12))")
            #expect(survivedWithAgent == 3, "\(agent.services.map { "\($0.name): \($0.status)" }) \(agent.agentRecords.suffix(12))")
        }

        @Test func withoutTheAgentAndEachSeeingOnlyItsOwnLimitTheKernelKillsOne() async throws {
            try await withTestCgroup(limit: 256 * Self.mebibyte) { parent in
                let outcome = try await Self.threeServices(parent).run(.ownLimitOnly)
                #expect(outcome.services.contains { !$0.survived }, "all survived a parent they did not watch: \(outcome.services.map(\.status))")
            }
        }

        // MARK: (c) An endpoint that hangs, one that lies

        @Test func anEndpointThatHangsHoldsUpNoOtherAskAndOneThatLiesCannotJumpTheOrder() async throws {
            try await withTestCgroup(limit: 320 * Self.mebibyte) { parent in
                // The stalled one is the largest by the kernel's count (160 MiB) and says it holds a
                // 128 MiB cache: asked first, it never answers. The service is asked beside it once
                // the stalled ask has waited 250 ms (it used to wait out the whole 2 s timeout);
                // the stalled one costs its timeout once. The liar holds 4 MiB and claims 64 GiB:
                // it stays last.
                var trial = SharedParentTrial(parent: parent, services: [.init(name: "service", rateMiB: 20, totalMiB: 200)])
                trial.endpoints = [("stalled", "stall", 160), ("liar", "lie", 4)]
                let outcome = try await trial.run(.agent)
                let service = try #require(outcome.services.first)
                #expect(service.survived, "exit \(service.status): \(service.standardError)")
                let stalled = parent.location.path + "/stalled"
                let liar = parent.location.path + "/liar"
                let unanswered = outcome.agent("unanswered")
                #expect(unanswered.count == 1 && unanswered.first?["cgroup"] as? String == stalled, "\(outcome.agentRecords)")
                let waited = unanswered.first?["milliseconds"] as? Double ?? .infinity
                #expect(waited >= 1900 && waited < 3000, "the stalled endpoint cost \(waited) ms, the timeout is 2 s")
                let asks = outcome.agent("ask")
                let first = try #require(asks.first { $0["cgroup"] as? String == parent.location.path + "/service" }, "\(asks)")
                // When each ask began: its line's time less its duration.
                func began(_ record: [String: Any]) -> Double? {
                    // `2026-11-28T06:47:15.347Z`: seconds of the day are enough, both lines are a second apart.
                    guard let time = record["time"] as? String, let clock = time.split(separator: "T").last?.dropLast(),
                        let took = record["milliseconds"] as? Double
                    else { return nil }
                    let parts = clock.split(separator: ":").compactMap { Double($0) }
                    guard parts.count == 3 else { return nil }
                    return parts[0] * 3600 + parts[1] * 60 + parts[2] - took / 1000
                }
                let gap = try #require(began(first)) - (try #require(began(unanswered[0])))
                #expect(gap > 0.2 && gap < 1.5, "the service was asked \(gap) s after the stalled one (its patience is 250 ms): \(asks)")
                let rounds = outcome.agent("round").compactMap { $0["order"] as? [[String: Any]] }
                #expect(!rounds.isEmpty)
                for order in rounds {
                    #expect(
                        order.map { $0["cgroup"] as? String } == [stalled, parent.location.path + "/service", liar].map(Optional.some),
                        "by the kernel's count the liar (4 MiB, claiming 64 GiB) is last: \(order)")
                }
                for ask in asks where ask["cgroup"] as? String == liar {
                    #expect((ask["rank"] as? Int ?? 0) == 3, "the liar moved up: \(ask)")
                    #expect((ask["measuredFreedBytes"] as? Int ?? .max) < 1 << 20, "the liar's claim was believed: \(ask)")
                }
            }
        }

        // MARK: (d) The agent killed mid-release

        @Test func anAgentKilledMidReleaseLeavesEveryServiceWorking() async throws {
            try await withTestCgroup(limit: 256 * Self.mebibyte) { parent in
                var trial = Self.threeServices(parent)
                trial.killsAgentAtFirstCrossing = true
                // A lease longer than the whole trial: only the services' watch of the agent's end
                // (a pidfd) can give them the parent back in time.
                trial.agentArguments = ["--lease", "60s"]
                let outcome = try await trial.run(.agent)
                #expect(outcome.agent("crossing").count == 1)
                // Each service's monitor saw the agent end (a pidfd) and counts the parent again at
                // once, not when the 60 s lease runs out: they release on their own, and all survive.
                for service in outcome.services { #expect(service.survived, "\(service.name): exit \(service.status): \(service.standardError)") }
                #expect(outcome.services.contains { !$0.all("release").isEmpty }, "no service released after the agent died")
            }
        }
    }
}

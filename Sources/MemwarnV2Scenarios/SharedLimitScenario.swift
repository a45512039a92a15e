import Foundation
import MemwarnTestKit

/// Three memwarn services under a limited parent, with the node agent: the v1 shared-limit test
/// (`SharedLimitTests.withTheAgentAllSurviveTheLargestIsAskedFirstAndTheSmallestNever`) on real
/// cgroup v2 memory. Below the scenario's own cgroup, a parent with `memory.max` = 256 MiB and in
/// it one child cgroup per service, with no limit of its own: `memwarn-growth-probe`s inserting
/// 150 MiB at 60 MiB/s (`large`), 90 at 30 (`medium`) and 45 at 12 (`small`), whose sum does not
/// fit.
///
/// 1. With `memwarn agent --cgroup <parent>`: every service survives; the agent finds the three,
///    asks at least once, orders each round by kernel-measured usage (largest first, the first
///    round led by `large`), asks in that order, and never asks `small`.
/// 2. The counterfactual, in a fresh parent: no agent, and each service sees only its own limit
///    (`MEMWARN_ANCESTOR_LIMITS=ignore`): the kernel kills at least one.
enum SharedLimitScenario {
    static let scenario = Scenario(name: "shared-limit-agent", timeLimit: .seconds(360), body: run)
    static let parentLimit = 256 * mebibyte
    static let services: [SharedParentTrial.Service] = [
        .init(name: "large", rateMiB: 60, totalMiB: 150), .init(name: "medium", rateMiB: 30, totalMiB: 90),
        .init(name: "small", rateMiB: 12, totalMiB: 45),
    ]

    static func run(_ context: ScenarioContext) async throws {
        let own = try context.makeCgroup()

        let parent = try own.child("agent", settings: [("memory.max", "\(parentLimit)")])
        let outcome = try await SharedParentTrial(parent: parent, services: services).run(.agent)
        let agentKills = try parent.reader.events().oomKill
        try? parent.remove()
        try checkAgentRun(outcome, parentPath: parent.location.path, context: context)
        context.note("parent memory.events oom_kill \(agentKills)")

        let blind = try own.child("own-limit-only", settings: [("memory.max", "\(parentLimit)")])
        let counterfactual = try await SharedParentTrial(parent: blind, services: services).run(.ownLimitOnly)
        let blindKills = try blind.reader.events().oomKill
        try? blind.remove()
        let statuses = counterfactual.services.map { "\($0.name) \($0.survived ? "survived" : "exit \($0.status)")" }.joined(separator: ", ")
        try expect(counterfactual.services.contains { !$0.survived }, "all survived a parent they did not watch: \(statuses)")
        let inserted = counterfactual.services.map { service in
            "\(service.name) \(service.all("done").first?["inserted"].map { "\($0)" } ?? "?")"
        }.joined(separator: ", ")
        context.note(
            "own limit only, no agent: \(statuses); parent memory.events oom_kill \(blindKills); "
                + "inserted (done) \(inserted); parent peak \(describe(bytes: counterfactual.parentPeakBytes))")
    }

    static func checkAgentRun(_ outcome: SharedParentTrial.Outcome, parentPath: String, context: ScenarioContext) throws {
        for service in outcome.services {
            try expect(service.survived, "with the agent, \(service.name) did not survive: exit \(service.status): \(service.standardError.suffix(400))")
        }
        let found = outcome.agent("found")
        try expect(found.count == 3, "the agent found \(found.count) services, expected 3: \(found) \(outcome.agentStandardError.suffix(400))")
        let asks = outcome.agent("ask")
        try expect(
            !asks.isEmpty && !outcome.agent("relieved").isEmpty,
            "the agent never asked (or was never relieved): \(outcome.agentRecords) \(outcome.agentStandardError.suffix(400))")
        let large = parentPath + "/large"
        let small = parentPath + "/small"
        // Each round's order is by the kernel's count, largest first, and each ask follows it.
        var order: [[String: Any]] = []
        for record in outcome.agentRecords {
            if record["event"] as? String == "round", let next = record["order"] as? [[String: Any]] {
                order = next
                let sizes = next.map { $0["usageBytes"] as? UInt64 ?? 0 }
                try expect(sizes == sizes.sorted(by: >), "a round's order is not largest first: \(next)")
            } else if record["event"] as? String == "ask", let rank = record["rank"] as? Int {
                try expect(
                    rank >= 1 && rank <= order.count && order[rank - 1]["cgroup"] as? String == record["cgroup"] as? String,
                    "an ask does not follow its round's order: \(record) against \(order)")
            }
        }
        let firstOrder = outcome.agent("round").first?["order"] as? [[String: Any]]
        try expect(firstOrder?.first?["cgroup"] as? String == large, "the first round is not led by \(large): \(String(describing: firstOrder))")
        try expect(!asks.contains { $0["cgroup"] as? String == small }, "the smallest was asked: \(asks)")
        // Told and measured are both reported; the measured bytes come from the kernel.
        try expect(
            asks.allSatisfy { ($0["measuredFreedBytes"] as? Int ?? 0) > 0 && $0["reportedFreedBytes"] != nil },
            "an ask without kernel-measured freed bytes or a report: \(asks)")

        let relief = outcome.episodes.map { episode in
            episode.duration.map { duration in
                let milliseconds = Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15
                return "\((milliseconds * 10).rounded() / 10) ms"
            } ?? "open"
        }
        let askedCgroups = asks.compactMap { ($0["cgroup"] as? String)?.split(separator: "/").last.map(String.init) }
        context.note(
            "with the agent: all 3 survived, \(asks.count) asks (\(askedCgroups.joined(separator: ", "))), "
                + "\(outcome.agent("round").count) rounds, first led by large")
        context.note(
            "relief (parent from 80 % back under 70 %): \(relief.isEmpty ? "no episode" : relief.joined(separator: ", ")); "
                + "released \(describe(bytes: outcome.releasedBytes)) (\(outcome.releasedBytes) bytes); "
                + "parent peak \(describe(bytes: outcome.parentPeakBytes)) of \(describe(bytes: parentLimit))")
    }
}

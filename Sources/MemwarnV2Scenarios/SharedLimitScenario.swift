import Foundation
import MemwarnMonitor
import MemwarnTestKit

/// Three memwarn services under a limited parent, with the node agent: the v1 shared-limit test
/// (`SharedLimitTests.withTheAgentAllSurviveTheLargestIsAskedFirstAndTheSmallestNever`) on real
/// cgroup v2 memory. Below the scenario's own cgroup, a parent with `memory.max` = 256 MiB and in
/// it one child cgroup per service, with no limit of its own: `memwarn-growth-probe`s inserting
/// 150 MiB at 60 MiB/s (`large`), 90 at 30 (`medium`) and 45 at 12 (`small`), whose sum does not
/// fit.
///
/// 1. With `memwarn agent --cgroup <parent>`, what the agent promises, whatever the machine's
///    pace: no OOM kill (every service survives, the parent's `oom_kill` stays 0); the agent
///    finds the three and asks at least once; each round lists the services by kernel-measured
///    usage, largest first, and the round's asks follow that list (at each level the ranks rise,
///    each naming the service at its place); the parent is relieved (a `relieved` record, under
///    the recovery mark). Which services a round reaches is not asserted: on a quiet machine the
///    largest's release is enough and `small` is never asked, but when each ask takes hundreds
///    of milliseconds (emulation under load) and the parent's growth keeps pace, the agent rightly
///    goes on down the order. Which were asked, and at which rank, is noted.
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
        try expect(agentKills == 0, "with the agent, the parent's memory.events counts \(agentKills) OOM kills")
        try checkAgentRun(outcome, context: context)
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

    static func checkAgentRun(_ outcome: SharedParentTrial.Outcome, context: ScenarioContext) throws {
        for service in outcome.services {
            try expect(service.survived, "with the agent, \(service.name) did not survive: exit \(service.status): \(service.standardError.suffix(400))")
        }
        let found = outcome.agent("found")
        try expect(found.count == 3, "the agent found \(found.count) services, expected 3: \(found) \(outcome.agentStandardError.suffix(400))")
        let asks = outcome.agent("ask")
        try expect(!asks.isEmpty, "the agent never asked: \(outcome.agentRecords) \(outcome.agentStandardError.suffix(400))")
        let ranked = try checkOrder(outcome.agentRecords)
        // On cgroup v2 the kernel wakes the agent: the monitor's inotify watch of the parent's memory.events.
        let watching = try require(outcome.agent("watching").first?["reason"] as? String, "no watching record: \(outcome.agentRecords.prefix(4))")
        try expect(
            watching.split(separator: "; ").contains { $0.hasPrefix("inotify ") && $0.hasSuffix("/memory.events") },
            "the agent is not woken by the parent's memory.events: \(watching)")
        let relieved = outcome.agent("relieved")
        try expect(!relieved.isEmpty, "the agent was never relieved: \(outcome.agentRecords) \(outcome.agentStandardError.suffix(400))")
        for record in relieved {
            let usage = try require(record["parentUsageBytes"] as? Int, "a relieved record without the parent's usage: \(record)")
            let limit = try require(record["parentLimitBytes"] as? Int, "a relieved record without the parent's limit: \(record)")
            // Relief: the parent back under its recovery mark, as the agent read it.
            let marks = LevelMarks(policy: PressurePolicy(), capacityBytes: UInt64(limit))
            try expect(
                marks.asked(byUsage: UInt64(usage)) == (.normal, false),
                "relieved at \(usage) of \(limit), not under the recovery mark (\(marks.recoveryBytes))")
        }
        // Told and measured are both reported (the measured bytes come from the kernel: a service
        // that grows while it releases can show less than it freed, so only their presence is
        // asserted), and the services asked did release.
        try expect(
            asks.allSatisfy { $0["measuredFreedBytes"] as? Int != nil && $0["reportedFreedBytes"] as? Int != nil },
            "an ask without kernel-measured freed bytes or a report: \(asks)")
        let reported = asks.reduce(0) { $0 + ($1["reportedFreedBytes"] as? Int ?? 0) }
        let measured = asks.reduce(0) { $0 + ($1["measuredFreedBytes"] as? Int ?? 0) }
        try expect(reported > 0, "the services asked reported freeing nothing: \(asks)")

        let relief = outcome.episodes.map { episode in
            episode.duration.map { duration in
                let milliseconds = Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15
                return "\((milliseconds * 10).rounded() / 10) ms"
            } ?? "open"
        }
        let askTimes = asks.compactMap { $0["milliseconds"] as? Double }.map { "\(Int($0.rounded())) ms" }
        let rounds = outcome.agent("round").count
        context.note(
            "with the agent: all 3 survived, \(asks.count) asks in \(rounds) rounds (\(ranked.joined(separator: ", "))), "
                + "each taking \(askTimes.joined(separator: ", ")); freed \(describe(bytes: reported)) reported, \(describe(bytes: max(0, measured))) measured")
        context.note(
            "relief (parent from 80 % back under 70 %): \(relief.isEmpty ? "no episode" : relief.joined(separator: ", ")); "
                + "\(relieved.count) relieved records; released \(describe(bytes: outcome.releasedBytes)) (\(outcome.releasedBytes) bytes); "
                + "parent peak \(describe(bytes: outcome.parentPeakBytes)) of \(describe(bytes: parentLimit))")
    }

    /// Checks that every ask (and every ask that went unanswered) follows the order of its
    /// round: a round lists the services by kernel-measured usage, largest first; an ask names
    /// the service at its rank in that list; within a round the ranks rise at each level, and the
    /// critical asks, if any, come after the warning ones and start again from the largest.
    ///
    /// - Returns: each ask as `name #rank level`, in order, for the verdict line.
    static func checkOrder(_ records: [[String: Any]]) throws -> [String] {
        var order: [String] = []
        var last: (level: String, rank: Int)?
        var asked: [String] = []
        for record in records {
            switch record["event"] as? String {
            case "round":
                let entries = try require(record["order"] as? [[String: Any]], "a round without an order: \(record)")
                let sizes = try entries.map { try require($0["usageBytes"] as? Int, "a ranked service without its usage: \(record)") }
                try expect(sizes == sizes.sorted(by: >), "a round's order is not largest first by usage: \(entries)")
                order = try entries.map { try require($0["cgroup"] as? String, "a ranked service without its cgroup: \(record)") }
                last = nil
            case "ask", "unanswered":
                let rank = try require(record["rank"] as? Int, "an ask without its rank: \(record)")
                let level = try require(record["level"] as? String, "an ask without its level: \(record)")
                let cgroup = record["cgroup"] as? String
                try expect(
                    rank >= 1 && rank <= order.count && order[rank - 1] == cgroup,
                    "an ask does not name the service at its rank in its round's order: \(record) against \(order)")
                if let last {
                    let follows =
                        level == last.level ? rank > last.rank : (last.level == "warning" && level == "critical")
                    try expect(follows, "asks out of their round's order: \(record) after rank \(last.rank) at \(last.level)")
                }
                last = (level, rank)
                let name = cgroup?.split(separator: "/").last.map(String.init) ?? "?"
                asked.append("\(name) #\(rank) \(level)" + (record["event"] as? String == "unanswered" ? " (unanswered)" : ""))
            default:
                continue
            }
        }
        return asked
    }
}

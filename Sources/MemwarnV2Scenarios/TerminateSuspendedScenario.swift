import Foundation
import MemwarnTestKit

/// Terminate-suspended on v2: `memwarn-lifecycle-probe` in a 256 MiB v2 cgroup holds three
/// suspended sessions (48, 32, 16 MiB) and two active ones (40, 24 MiB); unreleasable ballast
/// takes usage to 93 %. Its own monitor (its cgroup found from `/proc/self/cgroup`, usage
/// polled) sees critical, and suspended sessions are terminated, largest first, until the target
/// is met: big and mid for usage back to the recovery mark, small too when the growth headroom
/// asks for it; every session comes back with 0 lost writes.
/// The same flow as the v1 test (Tests/MemwarnLifeCycleTests/LifeCycleProcessTests.swift).
enum TerminateSuspendedScenario {
    static let scenario = Scenario(name: "terminate-suspended", timeLimit: .seconds(300), body: run)
    static let limit = 256 * mebibyte
    /// Sessions by size (MiB) and the writes each acknowledges.
    static let suspended = [("big", 48, 300), ("mid", 32, 200), ("small", 16, 100)]
    static let active = [("hot", 40, 50), ("warm", 24, 25)]

    static func run(_ context: ScenarioContext) async throws {
        let cgroup = try context.makeCgroup(memoryMax: limit)
        let probe = try JSONLineChild([context.products.lifeCycleProbe, "--suspension-delay-ms", "20"], in: cgroup)
        for (id, mebibytes, writes) in suspended + active {
            try expect(try await probe.send("unit \(id) \(mebibytes)", within: .seconds(120))["state"] as? String == "active", "unit \(id) is not active")
            try expect(
                try await probe.send("write \(id) \(writes)", within: .seconds(120))["acknowledged"] as? Int == writes, "writes of \(id) not acknowledged")
        }
        for (id, _, _) in suspended {
            try expect(try await probe.send("suspend \(id)", within: .seconds(120))["state"] as? String == "suspended", "unit \(id) is not suspended")
        }
        try expect(try await probe.send("watch", within: .seconds(120))["watching"] as? String == "normal", "the probe's monitor does not start at normal")

        let ballast = Int(Double(limit) * 0.93) - Int(try cgroup.reader.usage())
        try expect(ballast > 0, "usage is already above 93% before the ballast")
        try probe.child.send("ballast \(ballast)")
        let critical = try await probe.receive(until: { $0["level"] as? String == "critical" && $0["entries"] != nil }, within: .seconds(120))
        let entries = try require(critical["entries"] as? [[String: Any]], "the critical report has no entries")
        try expect(!entries.contains { $0["tier"] as? String == "caches" && ($0["bytesFreed"] as? Int ?? 0) > 0 }, "the active sessions' caches were released")
        // The target is usage back to the recovery mark plus headroom for the growth the monitor
        // measured while the ballast climbed: the part without headroom needs big and mid, the
        // headroom may need small too (SuspendedTermination).
        let expected = try SuspendedTermination(report: critical, suspended: suspended.map { ($0.0, $0.1 * mebibyte) })
        let terminated = SuspendedTermination.terminations(in: critical)
        context.note(
            "terminated \(terminated.map(\.id)) freeing \(terminated.map { describe(bytes: $0.bytes) }), target \(describe(bytes: expected.targetBytes)) (headroom \(describe(bytes: expected.headroomBytes)))"
        )
        let withoutHeadroom = expected.targetBytes - expected.headroomBytes
        try expect(
            withoutHeadroom > 48 * mebibyte && withoutHeadroom <= 80 * mebibyte,
            "target without headroom \(withoutHeadroom): big alone should not be enough, big and mid should")
        try expect(
            terminated.map(\.id) == expected.units.map(\.id) && expected.units.count >= 2,
            "largest first, stopping at the target: terminated \(terminated.map(\.id)), expected \(expected.units.map(\.id))")
        try expect(terminated.map(\.bytes) == expected.units.map(\.bytes), "freed \(terminated.map(\.bytes))")
        try expect(critical["metTarget"] as? Bool == expected.canMeetTarget, "metTarget is not \(expected.canMeetTarget)")
        let terminatedIDs = Set(expected.units.map(\.id))

        // The monitor may release again on its own (another rise): its reports are skipped,
        // and so is the ballast's reply if the critical report came before it.
        let isReport: ([String: Any]) -> Bool = { $0["entries"] != nil || $0["ballast"] != nil }
        let states = try await probe.send("status", skipping: isReport, within: .seconds(120)).mapValues {
            ($0 as? String)?.split(separator: " ").first.map(String.init) ?? "?"
        }
        var expectedStates = ["hot": "active", "warm": "active"]
        for (id, _, _) in suspended { expectedStates[id] = terminatedIDs.contains(id) ? "not-running" : "suspended" }
        try expect(states == expectedStates, "states \(states)")
        let usage = try cgroup.reader.usage()
        try expect(Double(usage) < Double(limit) * 0.8, "usage \(describe(bytes: usage)) did not fall below 80% after the release")
        context.note("states \(states.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")), usage \(describe(bytes: usage))")

        // The suspended one first: relaunching the others takes usage past the critical mark
        // again, and a suspended unit would then rightly be terminated, if the monitor got
        // there first.
        var lost = 0
        for (id, _, writes) in suspended.reversed() {
            let reply = try await probe.send("activate \(id)", skipping: isReport, within: .seconds(120))
            try expect(
                reply["state"] as? String == "active" && reply["launches"] as? String == (terminatedIDs.contains(id) ? "2" : "1")
                    && reply["present"] as? String == "\(writes)" && reply["intact"] as? String == "true",
                "activate \(id): \(reply)")
            lost += Int(reply["lost"] as? String ?? "-1") ?? -1
        }
        try expect(lost == 0, "lost writes: \(lost)")
        context.note("resumed the suspended, relaunched \(expected.units.map(\.id).joined(separator: " and ")) (launch 2): 0 lost writes")
        probe.child.closeInput()
        _ = try? await probe.child.exitStatus(within: .seconds(20))
    }
}

import Foundation

/// A short soak on v2: `memwarn soak --duration 15s --json` runs `memwarn-demo` (beside
/// `memwarn`) under 256 MiB twice, each in a v2 cgroup made by `memwarn run`'s machinery. With
/// memwarn it must survive with 0 OOM kills and 0 lost writes; without it, be OOM-killed
/// (the checks of Scripts/ci-soak).
enum SoakScenario {
    static let scenario = Scenario(name: "soak", timeLimit: .seconds(420), body: run)

    static func run(_ context: ScenarioContext) async throws {
        let soak = try await CommandRun.run([context.products.memwarn, "soak", "--duration", "15s", "--json"], within: .seconds(400))
        let last = try require(soak.lines.last, "memwarn soak printed nothing; exit \(soak.status), stderr \(soak.errorTail)")
        let report = try JSONObject.parse(last)
        let runs = (report["runs"] as? [[String: Any]] ?? []).reduce(into: [String: [String: Any]]()) { $0[$1["label"] as? String ?? "?"] = $1 }
        let memwarn = try require(runs["memwarn"], "no memwarn run: \(report)")
        let baseline = try require(runs["baseline"], "no baseline run: \(report)")
        context.note("memwarn: \(summary(memwarn)); baseline: \(summary(baseline))")
        try expect(soak.status == 0 && report["passed"] as? Bool == true, "the soak did not pass (exit \(soak.status))")
        try expect(memwarn["survived"] as? Bool == true && memwarn["oomKills"] as? Int == 0 && memwarn["lostWrites"] as? Int == 0,
                   "with memwarn the demo did not survive cleanly")
        try expect(baseline["survived"] as? Bool == false && (baseline["oomKills"] as? Int ?? 0) >= 1, "without memwarn the demo was not OOM-killed")
    }

    /// One run of the report in a few words.
    private static func summary(_ run: [String: Any]) -> String {
        let survived = (run["survived"] as? Bool).map { $0 ? "survived" : "killed" } ?? "?"
        let counts = ["oomKills", "lostWrites", "unitsTerminated"].map { "\($0) \(run[$0].map { "\($0)" } ?? "none")" }
        return ([survived] + counts).joined(separator: ", ")
    }
}

import Foundation

/// A short soak on v2: `memwarn soak --duration 15s --json` runs `memwarn-demo` (beside
/// `memwarn`) under 256 MiB twice, each in a v2 cgroup made by `memwarn run`'s machinery. With
/// memwarn it must survive with 0 OOM kills and 0 lost writes; without it, be OOM-killed
/// (the checks of Scripts/ci-soak).
enum SoakScenario {
    static let scenario = Scenario(name: "soak", timeLimit: .seconds(420), body: run)
    static let ownService = Scenario(name: "soak-own-service", timeLimit: .seconds(240), body: runOwnService)

    /// `memwarn soak -- memwarn-growth-probe` (a service as the README teaches, 20 MiB/s into a
    /// cache, its control endpoint in the default directory) under 128 MiB on v2: with memwarn it
    /// survives, its own releases are read, and its floor comes from v2's `anon`; the baseline
    /// (`MEMWARN_DISABLE=1`) is OOM-killed.
    static func runOwnService(_ context: ScenarioContext) async throws {
        let soak = try await CommandRun.run(
            [
                context.products.memwarn, "soak", "--memory-max", "128M", "--duration", "10s", "--ready-after", "1s",
                "--json", "--", context.products.growthProbe, "--rate", "20", "--total", "100000", "--control", "default",
            ],
            within: .seconds(200))
        let last = try require(soak.lines.last, "memwarn soak printed nothing; exit \(soak.status), stderr \(soak.errorTail)")
        let report = try JSONObject.parse(last)
        let runs = (report["runs"] as? [[String: Any]] ?? []).reduce(into: [String: [String: Any]]()) { $0[$1["label"] as? String ?? "?"] = $1 }
        let memwarn = try require(runs["memwarn"], "no memwarn run: \(report)")
        let baseline = try require(runs["baseline"], "no baseline run: \(report)")
        let trend = memwarn["trend"] as? [String: Any] ?? [:]
        context.note(
            "memwarn: survived \(memwarn["survived"] ?? "?"), releases \(memwarn["releases"] ?? "?"), floor \(trend["floorBytes"] ?? "?") "
                + "(\(trend["samplesLeftOut"] ?? "?") samples left out, troughs \(trend["troughs"].map { "\($0)" } ?? "?")), trend \(trend["verdict"] ?? "?"); baseline: survived \(baseline["survived"] ?? "?"), oomKills \(baseline["oomKills"] ?? "?")"
        )
        try expect(soak.status == 0 && report["passed"] as? Bool == true, "the soak did not pass (exit \(soak.status)): \(soak.errorTail)")
        try expect(
            memwarn["survived"] as? Bool == true && memwarn["linksMemwarn"] as? Bool == true && (memwarn["releases"] as? Int ?? 0) > 0,
            "with memwarn the service did not survive, or its releases were not read: \(memwarn)")
        try expect((trend["floorBytes"] as? Int ?? 0) > 0, "no floor from v2's memory.stat anon: \(trend)")
        try expect((memwarn["stall"] as? [String: Any])?["source"] as? String == "cgroup", "v2: the run's own memory.pressure: \(memwarn["stall"] ?? "none")")
        try expect(baseline["survived"] as? Bool == false && (baseline["oomKills"] as? Int ?? 0) >= 1, "without memwarn the service was not OOM-killed")
    }

    static func run(_ context: ScenarioContext) async throws {
        let soak = try await CommandRun.run([context.products.memwarn, "soak", "--duration", "15s", "--json"], within: .seconds(400))
        let last = try require(soak.lines.last, "memwarn soak printed nothing; exit \(soak.status), stderr \(soak.errorTail)")
        let report = try JSONObject.parse(last)
        let runs = (report["runs"] as? [[String: Any]] ?? []).reduce(into: [String: [String: Any]]()) { $0[$1["label"] as? String ?? "?"] = $1 }
        let memwarn = try require(runs["memwarn"], "no memwarn run: \(report)")
        let baseline = try require(runs["baseline"], "no baseline run: \(report)")
        context.note("memwarn: \(summary(memwarn)); baseline: \(summary(baseline))")
        try expect(soak.status == 0 && report["passed"] as? Bool == true, "the soak did not pass (exit \(soak.status))")
        try expect(
            memwarn["survived"] as? Bool == true && memwarn["oomKills"] as? Int == 0 && memwarn["lostWrites"] as? Int == 0,
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

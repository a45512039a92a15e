import Foundation
import MemwarnTestKit

/// `memwarn status --json` (the static CLI) against v2 cgroups: the mode, the cgroup named
/// both ways, usage against `memory.current`, the effective limit (the cgroup's own
/// `memory.max`, then an ancestor's `memory.high`), the level, the cgroup's own PSI file; and
/// an unknown cgroup as one `Error:` line with a non-zero status.
enum StatusCommandScenario {
    static let scenario = Scenario(name: "cli-status-json", timeLimit: .seconds(120), body: run)

    static func run(_ context: ScenarioContext) async throws {
        let outer = try context.makeCgroup()
        let inner = try outer.child("inner", settings: [("memory.max", "\(hogCgroupLimit)")])
        let hog = try MemoryHog(in: inner, binary: context.products.hog)
        try await hog.hold(0.85, of: hogCgroupLimit)

        for path in [inner.location.path, inner.location.directory] {
            let status = try await status(context, path)
            try expectCommon(status, inner)
            try expect(
                status["limitBytes"] as? Int == hogCgroupLimit && status["limitFile"] as? String == "memory.max"
                    && status["limitCgroup"] as? String == inner.location.path && status["level"] as? String == "warning",
                "--cgroup \(path): limit \(String(describing: status["limitBytes"])) from \(String(describing: status["limitFile"])) of \(String(describing: status["limitCgroup"])), level \(String(describing: status["level"]))"
            )
            context.note("--cgroup \(path): level warning, ratio \(status["ratio"].map { "\($0)" } ?? "?"), limit 64 MiB memory.max")
        }

        try inner.set("memory.max", to: "max")
        try outer.set("memory.high", to: "\(96 * mebibyte)")
        let ancestor = try await status(context, inner.location.path)
        try expectCommon(ancestor, inner)
        try expect(
            ancestor["limitBytes"] as? Int == 96 * mebibyte && ancestor["limitFile"] as? String == "memory.high"
                && ancestor["limitCgroup"] as? String == outer.location.path && ancestor["level"] as? String == "normal",
            "an ancestor's memory.high: \(ancestor)")
        context.note("with the parent's memory.high 96 MiB: level normal, limit from memory.high of \(outer.location.path)")

        let missing = try await CommandRun.run([context.products.memwarn, "status", "--json", "--cgroup", "/v2s-no-such-cgroup"])
        try expect(
            missing.status != 0 && missing.errorTail.contains("Error:") && missing.errorTail.contains("v2s-no-such-cgroup"),
            "a missing cgroup: status \(missing.status), stderr \(missing.errorTail)")
        context.note("a missing cgroup: exit \(missing.status), \(missing.errorTail)")
        await hog.stop()
    }

    /// Runs `memwarn status --json --cgroup PATH` and checks it succeeded with one JSON line.
    private static func status(_ context: ScenarioContext, _ path: String) async throws -> [String: Any] {
        let run = try await CommandRun.run([context.products.memwarn, "status", "--json", "--cgroup", path])
        try expect(
            run.status == 0 && run.lines.count == 1, "memwarn status --cgroup \(path): status \(run.status), output \(run.lines), stderr \(run.errorTail)")
        return try JSONObject.parse(run.lines[0])
    }

    /// What holds for every reading of the cgroup: v2, its paths, usage, PSI file.
    private static func expectCommon(_ status: [String: Any], _ cgroup: TestCgroup) throws {
        try expect(
            status["mode"] as? String == "v2" && status["measure"] as? String == "cgroup"
                && status["cgroupPath"] as? String == cgroup.location.path && status["cgroupDirectory"] as? String == cgroup.location.directory,
            "mode, measure or cgroup: \(status)")
        let usage = try require(status["usageBytes"] as? Int, "no usageBytes: \(status)")
        let current = Int(try cgroup.reader.usage())
        try expect(abs(usage - current) <= mebibyte, "usageBytes \(usage), memory.current \(current)")
        let psi = try require(status["psi"] as? [String: Any], "no psi: \(status)")
        try expect(
            psi["file"] as? String == cgroup.location.file("memory.pressure") && psi["full"] is [String: Any],
            "psi should be the cgroup's own memory.pressure with a full line: \(psi)")
    }
}

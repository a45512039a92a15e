import Foundation
import MemwarnTestKit

/// `memwarn watch --json` (the static CLI) on a v2 cgroup with a 64 MiB `memory.max`, the policy
/// from `MEMWARN_*` variables: the initial line, then one line per change as a hog steps to
/// 85 %, 95 % and 0 % (warning, critical, normal, found by sampling `memory.current`); every
/// line has the same keys; SIGTERM ends it with status 0.
enum WatchCommandScenario {
    static let scenario = Scenario(name: "cli-watch-json", timeLimit: .seconds(180), body: run)
    static let keys: Set<String> = [
        "time", "level", "previous", "usageBytes", "limitBytes", "limitCgroup", "cgroupUsageBytes", "ratio", "source", "growthBytesPerSecond",
        "secondsToCritical", "secondsToLimit",
    ]

    static func run(_ context: ScenarioContext) async throws {
        let (cgroup, hog) = try context.cgroupWithHog(memoryMax: hogCgroupLimit)
        let watch = try LineChild(
            [context.products.memwarn, "watch", "--json", "--cgroup", cgroup.location.path],
            environment: ScenarioContext.environment(adding: [
                "MEMWARN_POLL_INTERVAL": "250ms", "MEMWARN_RECHECK_INTERVAL": "250ms", "MEMWARN_HOLD_TIME": "500ms",
            ]))
        defer { watch.killIfRunning() }

        let first = try await line(watch)
        try expect(
            first["level"] as? String == "normal" && first["previous"] is NSNull && first["source"] as? String == "initial"
                && first["limitBytes"] as? Int == hogCgroupLimit, "the first line: \(first)")
        var seen: [String] = []
        for (fraction, level, previous) in [(0.85, "warning", "normal"), (0.95, "critical", "warning"), (0.0, "normal", "critical")] {
            try await hog.hold(fraction, of: hogCgroupLimit)
            let change = try await line(watch)
            try expect(
                change["level"] as? String == level && change["previous"] as? String == previous
                    && ["usage-sample", "poll", "recheck"].contains(change["source"] as? String ?? ""),
                "at \(Int(fraction * 100))% expected \(previous) -> \(level) found by sampling memory.current, got \(change)")
            seen.append("\(level) by \(change["source"] as? String ?? "?") at ratio \(change["ratio"].map { "\($0)" } ?? "?")")
        }
        context.note("lines: initial normal, " + seen.joined(separator: ", "))
        watch.signal(SIGTERM)
        let status = try await watch.exitStatus(within: .seconds(30))
        try expect(status == 0, "memwarn watch ended with \(status) after SIGTERM; stderr: \(watch.standardErrorTail)")
        context.note("SIGTERM: exit 0")
        await hog.stop()
    }

    /// The next JSON line, with exactly the documented keys.
    private static func line(_ watch: LineChild) async throws -> [String: Any] {
        let object = try JSONObject.parse(try await watch.nextLine(within: .seconds(20)))
        try expect(Set(object.keys) == keys, "a watch line has keys \(object.keys.sorted()), expected \(keys.sorted())")
        return object
    }
}

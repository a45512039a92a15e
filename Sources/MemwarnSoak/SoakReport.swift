import Foundation
import MemwarnSystem

/// The soak's result: both runs side by side.
public struct SoakReport: Sendable, Codable {
    public var memoryMaxBytes: UInt64
    public var durationSeconds: Double
    public var runs: [SoakRun]

    /// The memwarn run survived the whole load with no OOM kill and no lost write.
    public var passed: Bool {
        guard let memwarn = runs.first(where: \.memwarnEnabled) else { return false }
        return memwarn.survived && memwarn.demo.lostWrites == 0
    }

    /// The table `memwarn soak` prints.
    public var text: String {
        func row(_ name: String, _ value: (SoakRun) -> String) -> [String] { [name] + runs.map(value) }
        let mib = { (bytes: Int) in ByteSize.describe(UInt64(max(0, bytes))) }
        var rows = [
            [""] + runs.map { $0.memwarnEnabled ? "with memwarn" : "without (baseline)" },
            row("outcome") { run in
                run.survived ? "survived \(String(format: "%.0f", run.run.durationSeconds)) s"
                    : "killed after \(String(format: "%.1f", run.run.durationSeconds)) s (\(run.run.exit.signal.map { "signal \($0)" } ?? "status \(run.run.exitCode)"))"
            },
            row("OOM kills") { "\($0.run.oomKills)" },
            row("warnings") { "\($0.run.warnings["warning"] ?? 0)" },
            row("criticals") { "\($0.run.warnings["critical"] ?? 0)" },
            row("peak usage") { run in run.run.peakUsageBytes.map(ByteSize.describe) ?? "unknown" },
        ]
        let tiers = Set(runs.flatMap { $0.demo.releasedByTier.keys })
        for tier in ["discarded", "caches", "media", "shared-resources"] where tiers.contains(tier) {
            rows.append(row("released: \(tier)") { mib($0.demo.releasedByTier[tier] ?? 0) })
        }
        rows += [
            row("memory exhausted") { run in
                guard run.memwarnEnabled else { return "-" }
                guard let first = run.demo.exhaustions.first else { return "never" }
                return "\(run.demo.exhaustions.count)× (floor \(mib(first.floorBytes)))"
            },
            row("new users turned away") { run in run.memwarnEnabled ? "\(run.demo.turnedAway)" : "-" },
            row("forecast warnings") { run in
                guard run.memwarnEnabled, let raised = run.demo.forecastWarnings else { return "-" }
                return "\(raised) (\(run.demo.falseForecasts ?? 0) false)"
            },
            row("units terminated") { "\($0.demo.terminations.count)" },
            row("writes acknowledged") { run in "\(run.demo.writesAcknowledged ?? run.demo.writesAcknowledgedSoFar)\(run.demo.writesAcknowledged == nil ? "+ (at last report)" : "")" },
            row("lost writes") { run in run.demo.lostWrites.map(String.init) ?? "unknown (killed before verifying)" },
        ]
        let widths = (0..<rows[0].count).map { column in rows.map { $0[column].count }.max() ?? 0 }
        let lines = rows.map { row in
            String(row.enumerated().map { $0.element.padding(toLength: widths[$0.offset], withPad: " ", startingAt: 0) }
                .joined(separator: "   ").reversed().drop { $0 == " " }.reversed())
        }
        var verdict = passed ? "PASS: with memwarn the service survived, with 0 OOM kills and 0 lost writes"
            : "FAIL: with memwarn the service did not survive cleanly"
        if passed, let memwarn = runs.first(where: \.memwarnEnabled), memwarn.demo.turnedAway > 0 {
            verdict += ", shedding load: \(memwarn.demo.turnedAway) new users turned away while memory was exhausted"
        }
        if let reason = runs.first(where: \.memwarnEnabled)?.killReason { verdict += "\n" + reason }
        return (["memwarn soak: memwarn-demo under \(ByteSize.describe(memoryMaxBytes)) for \(String(format: "%.0f", durationSeconds)) s", ""]
            + lines + ["", verdict]).joined(separator: "\n")
    }

    /// The report as one JSON object (`memwarn soak --json`).
    public func json() throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return String(decoding: try encoder.encode(JSONForm(self)), as: UTF8.self)
    }

    /// The JSON: the verdict first, and each run without its samples (they are for the plot).
    private struct JSONForm: Encodable {
        var passed: Bool
        var memoryMaxBytes: UInt64
        var durationSeconds: Double
        var runs: [Run]

        struct Run: Encodable {
            var label: String
            var memwarnEnabled: Bool
            var survived: Bool
            var killedAfterSeconds: Double?
            var exitCode: Int32
            var oomKills: UInt64
            var warnings: [String: Int]
            var peakUsageBytes: UInt64?
            var releasedBytesByTier: [String: Int]
            var unitsTerminated: Int
            var exhaustions: Int
            var floorBytes: Int?
            var turnedAway: Int
            var forecastWarnings: Int?
            var falseForecasts: Int?
            var killReason: String?
            var writesAcknowledged: Int?
            var writesVerified: Int?
            var lostWrites: Int?
        }

        init(_ report: SoakReport) {
            passed = report.passed
            memoryMaxBytes = report.memoryMaxBytes
            durationSeconds = report.durationSeconds
            runs = report.runs.map { run in
                Run(label: run.label, memwarnEnabled: run.memwarnEnabled, survived: run.survived, killedAfterSeconds: run.killedAfterSeconds,
                    exitCode: run.run.exitCode, oomKills: run.run.oomKills, warnings: run.run.warnings, peakUsageBytes: run.run.peakUsageBytes,
                    releasedBytesByTier: run.demo.releasedByTier, unitsTerminated: run.demo.terminations.count,
                    exhaustions: run.demo.exhaustions.count, floorBytes: run.demo.exhaustions.first?.floorBytes, turnedAway: run.demo.turnedAway,
                    forecastWarnings: run.demo.forecastWarnings, falseForecasts: run.demo.falseForecasts, killReason: run.killReason,
                    writesAcknowledged: run.demo.writesAcknowledged, writesVerified: run.demo.writesVerified, lostWrites: run.demo.lostWrites)
            }
        }
    }
}

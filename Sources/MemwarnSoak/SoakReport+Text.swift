import Foundation
import MemwarnSystem

extension SoakReport {
    /// The table `memwarn soak` prints: a row a figure and a column a run, the notes, and the
    /// verdict with the kill reason.
    package var text: String {
        let rows = outcomeRows + releaseRows + serviceRows + stopRows + costRows + floorRows
        let widths = (0..<rows[0].count).map { column in rows.map { $0[column].count }.max() ?? 0 }
        let lines = rows.map { row in
            String(
                row.enumerated().map { $0.element.padding(toLength: widths[$0.offset], withPad: " ", startingAt: 0) }
                    .joined(separator: "   ").reversed().drop { $0 == " " }.reversed())
        }
        var verdict = self.verdict
        if problem == nil, let reason = runs.first(where: \.memwarnEnabled)?.killReason { verdict += "\n" + reason }
        let title = "memwarn soak: \(subject) under \(limits.map(ByteSize.describe).joined(separator: ", ")) for \(String(format: "%.0f", durationSeconds)) s"
        return ([title, ""] + lines + [""] + notes + ["", verdict]).joined(separator: "\n")
    }

    /// A row of the table: its name, then a cell a run.
    private func row(_ name: String, _ value: (SoakRun) -> String) -> [String] { [name] + runs.map(value) }

    /// `12.0 MiB`, for a count of bytes the service gave (never negative).
    private static func mib(_ bytes: Int) -> String { ByteSize.describe(reported: bytes) }

    /// The header, how each run ended, its levels and peak, and whether memwarn was in it.
    private var outcomeRows: [[String]] {
        let several = Set(runs.map(\.memoryMaxBytes)).count > 1
        return [
            [""] + runs.map { ranName($0) + (several ? " @ \(ByteSize.describe($0.memoryMaxBytes))" : "") },
            row("outcome") { run in
                if run.survived {
                    return "survived \(String(format: "%.0f", run.run.durationSeconds)) s" + (run.end == .finished ? " (ended itself, status 0)" : "")
                }
                if run.end == .interrupted && run.run.oomKills == 0 { return "interrupted after \(String(format: "%.1f", run.run.durationSeconds)) s" }
                if run.end == .notReady { return "not ready" + (run.run.oomKills > 0 ? " (OOM-killed)" : "") }
                return
                    "killed after \(String(format: "%.1f", run.run.durationSeconds)) s (\(run.run.exit.signal.map { "signal \($0)" } ?? "status \(run.run.exitCode)"))"
            },
            row("OOM kills") { "\($0.run.oomKills)" },
            row("warnings") { "\($0.run.warnings["warning"] ?? 0)" },
            row("criticals") { "\($0.run.warnings["critical"] ?? 0)" },
            row("peak usage") { run in run.run.peakUsageBytes.map(ByteSize.describe) ?? "unknown" },
            row("memwarn in the service") { run in
                if run.service.linksMemwarn { return run.memwarnEnabled ? "linked, answering" : "linked, turned off (MEMWARN_DISABLE=1)" }
                return run.demo != nil ? (run.memwarnEnabled ? "linked" : "off (--no-memwarn)") : "no (no control endpoint answered)"
            },
        ]
    }

    /// What was released, by tier and by consumer, and the most the consumers held in use.
    private var releaseRows: [[String]] {
        var rows: [[String]] = []
        let tiers = Set(runs.flatMap { $0.releasedByTier.keys })
        for tier in ["discarded", "caches", "media", "shared-resources", "suspended-units"] where tiers.contains(tier) {
            rows.append(row("released: \(tier)") { Self.mib($0.releasedByTier[tier] ?? 0) })
        }
        if runs.contains(where: { !$0.service.releasedBytesByConsumer.isEmpty }) {
            rows.append(
                row("largest releasers") { run in
                    let top = run.service.releasedBytesByConsumer.sorted { ($0.value, $1.key) > ($1.value, $0.key) }.prefix(3)
                    return top.isEmpty ? "-" : top.map { "\($0.key) \(Self.mib($0.value))" }.joined(separator: ", ")
                })
        }
        if runs.contains(where: { $0.service.linksMemwarn }) {
            rows.append(
                row("consumers in use (peak)") { run in
                    guard run.service.linksMemwarn else { return "-" }
                    guard let peak = run.service.peakInUse else {
                        return run.service.lastConsumers.contains { $0.inUseBytes != nil } ? "none" : "not reported by any consumer"
                    }
                    return "\(Self.mib(peak.bytes)) at \(String(format: "%.0f", peak.seconds)) s (\(peak.holders))"
                })
        }
        return rows
    }

    /// What the service did under pressure: exhaustion, load shed, forecasts, the demo's units
    /// and writes.
    private var serviceRows: [[String]] {
        var rows = [
            row("memory exhausted") { run in
                guard run.memwarnEnabled else { return "-" }
                if let demo = run.demo, let first = demo.exhaustions.first { return "\(demo.exhaustions.count)× (floor \(Self.mib(first.floorBytes)))" }
                return run.service.exhaustedSeconds > 0 ? "\(String(format: "%.0f", run.service.exhaustedSeconds)) s" : "never"
            },
            row("load shed") { run in
                if let demo = run.demo { return run.memwarnEnabled ? "\(demo.turnedAway) new users turned away" : "-" }
                guard let shed = run.service.shed else { return run.service.metricsScraped ? "no *_shed_total counter" : "-" }
                let names = run.service.shedCounters.keys.sorted().joined(separator: ", ")
                // A count is at most 2^53: a whole number of requests.
                return shed.count.map { "\(Int($0)) (\(names))" } ?? "unreadable: \(shed.reason() ?? "") (\(names))"
            },
            row("forecast warnings") { run in
                guard run.memwarnEnabled else { return "-" }
                if let raised = run.demo?.forecastWarnings { return "\(raised) (\(run.demo?.falseForecasts ?? 0) false)" }
                return run.service.linksMemwarn ? "\(run.service.forecastWarnings) (\(run.service.falseForecasts) false)" : "-"
            },
        ]
        if runs.contains(where: { $0.demo != nil }) {
            rows += [
                row("units terminated") { "\($0.demo?.terminations.count ?? 0)" },
                row("writes acknowledged") { run in
                    guard let demo = run.demo else { return "-" }
                    return "\(demo.writesAcknowledged ?? demo.writesAcknowledgedSoFar)\(demo.writesAcknowledged == nil ? "+ (at last report)" : "")"
                },
                row("lost writes") { run in run.demo?.lostWrites.map(String.init) ?? "unknown (killed before verifying)" },
            ]
        }
        return rows
    }

    /// How the service was stopped, and the load's and the check's statuses.
    private var stopRows: [[String]] {
        var rows: [[String]] = []
        if runs.contains(where: \.killedAtStop) {
            rows.append(row("stopped") { $0.killedAtStop ? "SIGKILL: it ignored SIGTERM for 10 s" : "by SIGTERM" })
        }
        if runs.contains(where: { $0.checkExitCode != nil || $0.loadExitCode != nil }) {
            rows.append(row("load exit status") { run in run.loadExitCode.map(String.init) ?? "-" })
            rows.append(row("check") { run in run.checkExitCode.map { $0 == 0 ? "passed" : "FAILED (status \($0))" } ?? "-" })
        }
        return rows
    }

    /// What survival cost, each figure the service reports (its endpoint's counters, its
    /// `/metrics`), and whether it thrashed. A figure whose counters were no count is
    /// `unreadable` (the notes say why).
    private var costRows: [[String]] {
        var rows: [[String]] = []
        let costs: [(String, (SurvivalCost) -> String?)] = [
            ("releases/s", { $0.releasesPerSecond.map { String(format: "%.2f", $0) } ?? Self.unreadable($0.releasesUnreadable) }),
            ("released/min", { $0.releasedBytesPerMinute.map(mebibytes) ?? Self.unreadable($0.releasesUnreadable) }),
            ("time releasing", { $0.releasingShare.map { String(format: "%.1f %%", $0 * 100) } ?? Self.unreadable($0.releasesUnreadable) }),
            ("throughput", { $0.requestsPerSecond.map { String(format: "%.0f requests/s", $0) } ?? Self.unreadable($0.requestsUnreadable != nil) }),
            ("cache miss rate", { $0.cacheMissRate.map { String(format: "%.1f %%", $0 * 100) } ?? Self.unreadable($0.cacheLookupsUnreadable != nil) }),
            (
                "thrashing",
                { cost in
                    if let thrashing = cost.thrashing, let window = cost.thrashingWindowSeconds {
                        return String(format: "YES: %.0f s of releases every second (%.0f s window)", thrashing.seconds, window)
                    }
                    guard cost.releasesPerSecond != nil else { return Self.unreadable(cost.releasesUnreadable) }
                    return cost.thrashingWindowSeconds.map { String(format: "no (%.0f s window)", $0) } ?? "too short to judge"
                }
            ),
        ]
        for (name, figure) in costs where runs.contains(where: { figure($0.cost) != nil }) {
            rows.append(row(name) { figure($0.cost) ?? "-" })
        }
        return rows
    }

    /// `unreadable` when `isUnreadable`, else `nil` (the figure is not reported).
    private static func unreadable(_ isUnreadable: Bool) -> String? { isUnreadable ? "unreadable" : nil }

    /// The memory stall, the floor and the trend.
    private var floorRows: [[String]] {
        var rows: [[String]] = []
        if runs.contains(where: { $0.stall != nil }) {
            rows.append(
                row("memory stall (PSI)") { run in
                    guard let stall = run.stall else { return "-" }
                    return stall.seconds + (stall.source == "cgroup" ? "" : " (system)")
                })
        }
        return rows + [
            row("floor") { run in
                guard let floor = run.trend.floorBytes else { return "unknown" }
                return ByteSize.describe(floor) + (run.trend.heapFloorBytes.map { " (heap in use \(ByteSize.describe($0)))" } ?? "")
            },
            row("memory trend") {
                $0.trend.verdict == .leaking
                    ? "leaking \(String(format: "%.2f", $0.trend.rateBytesPerMinute / 1_048_576)) MiB/min (\(percent($0.trend.confidence)))"
                    : $0.trend.verdict.rawValue
            },
        ]
    }

    /// The notes under the table: the trend, stall and cost of the runs made with memwarn on
    /// (named for what ran: ``memwarnRunsName``), and with several limits the lowest survived and
    /// the recommended one.
    private var notes: [String] {
        var notes: [String] = []
        let ran = memwarnRunsName
        if let memwarn = runs.last(where: \.memwarnEnabled) {
            notes.append("trend \(ran): " + memwarn.trend.summary)
            if let stall = memwarn.stall { notes.append("memory stall \(ran): " + stall.summary) }
        }
        for run in runs where run.memwarnEnabled && !run.cost.phrases.isEmpty {
            notes.append("cost \(ran) at \(ByteSize.describe(run.memoryMaxBytes)): " + run.cost.phrases.joined(separator: ", "))
        }
        if limits.count > 1 {
            let lowest = { (memwarn: Bool) in
                self.lowestSurvivingLimit(memwarnEnabled: memwarn).map(ByteSize.describe)
                    ?? "none of \(self.limits.map(ByteSize.describe).joined(separator: ", "))"
            }
            let baseline = memwarnInService ? "without" : "baseline"
            notes.append("lowest limit survived: \(ran) \(lowest(true))" + (runs.contains { !$0.memwarnEnabled } ? ", \(baseline) \(lowest(false))" : ""))
            if let recommended = recommendedLimit, let lowest = lowestComfortableLimit {
                notes.append(
                    "recommended limit, with a \(Int(Self.recommendedMargin * 100)) % margin\(memwarnInService ? "" : ", for the service without memwarn"): "
                        + "\(ByteSize.describe(recommended)) "
                        + "(the lowest survived without thrashing, \(ByteSize.describe(lowest)), plus \(Int(Self.recommendedMargin * 100)) % for a load heavier than this soak's)"
                )
            } else if let reason = noRecommendation {
                notes.append(reason)
            }
        }
        return notes
    }
}

public import Foundation
import MemwarnSystem

/// The soak's result: every run side by side, the lowest limit each survived, and the verdict.
public struct SoakReport: Sendable, Codable {
    /// The service soaked: `memwarn-demo`, or the command line.
    public var subject: String
    /// The first (smallest) limit. The JSON has it only for a soak of one limit: with several,
    /// each run has its own (`runs[].memoryMaxBytes`), and `limits` lists them.
    public var memoryMaxBytes: UInt64
    /// Every limit asked for, smallest first.
    public var limits: [UInt64]
    public var durationSeconds: Double
    public var runs: [SoakRun]
    /// The signal that interrupted the soak, if one did: the report is of what ran.
    public var interruptedBy: Int32?
    /// Why the soak could not be carried out to its end, if it could not (a service that never
    /// became ready or exited 0 early, a load that failed at once, a run that could not start):
    /// the report is of what ran.
    public var problem: Soak.SetupError?

    public init(
        subject: String, memoryMaxBytes: UInt64, limits: [UInt64], durationSeconds: Double, runs: [SoakRun], interruptedBy: Int32? = nil,
        problem: Soak.SetupError? = nil
    ) {
        self.subject = subject
        self.memoryMaxBytes = memoryMaxBytes
        self.limits = limits
        self.durationSeconds = durationSeconds
        self.runs = runs
        self.interruptedBy = interruptedBy
        self.problem = problem
    }

    /// Whether memwarn was seen in the service: it is the demo, or a control endpoint of a
    /// process in a run's cgroup answered. A service that never served one is taken for one that
    /// does not link memwarn: whatever it survived, memwarn did not help it.
    public var memwarnInService: Bool {
        runs.contains { $0.demo != nil || $0.service.linksMemwarn }
    }

    /// The lowest limit at which the run with memwarn (or the baseline) survived, if any did.
    public func lowestSurvivingLimit(memwarnEnabled: Bool) -> UInt64? {
        runs.filter { $0.memwarnEnabled == memwarnEnabled && $0.survived }.map(\.memoryMaxBytes).min()
    }

    /// The margin the recommended limit adds to the lowest limit survived without thrashing.
    public static let recommendedMargin = 0.25

    /// The lowest limit at which the run with memwarn survived without thrashing, if any did.
    public var lowestComfortableLimit: UInt64? {
        runs.filter { $0.memwarnEnabled && $0.survivedComfortably }.map(\.memoryMaxBytes).min()
    }

    /// With several limits: the lowest one survived with memwarn without thrashing, plus
    /// ``recommendedMargin`` (rounded up to a whole MiB) — a limit with room for a heavier load
    /// than the soak's, named as such wherever it is shown. `nil` with one limit, or when no limit
    /// was survived without thrashing.
    public var recommendedLimit: UInt64? {
        guard limits.count > 1, let lowest = lowestComfortableLimit else { return nil }
        let mebibyte: UInt64 = 1 << 20
        let padded = UInt64((Double(lowest) * (1 + Self.recommendedMargin)).rounded(.up))
        return (padded + mebibyte - 1) / mebibyte * mebibyte
    }

    /// With memwarn the service survived (at some limit, with several), not interrupted, and its
    /// data held (the demo lost no write; `--check` passed, when given).
    public var passed: Bool {
        guard interruptedBy == nil, problem == nil else { return false }
        return runs.contains { $0.memwarnEnabled && $0.survived && $0.dataHeld != false }
    }

    /// The table `memwarn soak` prints.
    public var text: String {
        let mib = { (bytes: Int) in ByteSize.describe(UInt64(max(0, bytes))) }
        func row(_ name: String, _ value: (SoakRun) -> String) -> [String] { [name] + runs.map(value) }
        let several = Set(runs.map(\.memoryMaxBytes)).count > 1
        var rows = [
            [""] + runs.map { ($0.memwarnEnabled ? "with memwarn" : "without (baseline)") + (several ? " @ \(ByteSize.describe($0.memoryMaxBytes))" : "") },
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
        let tiers = Set(runs.flatMap { $0.releasedByTier.keys })
        for tier in ["discarded", "caches", "media", "shared-resources", "suspended-units"] where tiers.contains(tier) {
            rows.append(row("released: \(tier)") { mib($0.releasedByTier[tier] ?? 0) })
        }
        if runs.contains(where: { !$0.service.releasedBytesByConsumer.isEmpty }) {
            rows.append(
                row("largest releasers") { run in
                    let top = run.service.releasedBytesByConsumer.sorted { ($0.value, $1.key) > ($1.value, $0.key) }.prefix(3)
                    return top.isEmpty ? "-" : top.map { "\($0.key) \(mib($0.value))" }.joined(separator: ", ")
                })
        }
        if runs.contains(where: { $0.service.linksMemwarn }) {
            rows.append(
                row("consumers in use (peak)") { run in
                    guard run.service.linksMemwarn else { return "-" }
                    guard let peak = run.service.peakInUse else {
                        return run.service.lastConsumers.contains { $0.inUseBytes != nil } ? "none" : "not reported by any consumer"
                    }
                    return "\(mib(peak.bytes)) at \(String(format: "%.0f", peak.seconds)) s (\(peak.holders))"
                })
        }
        rows += [
            row("memory exhausted") { run in
                guard run.memwarnEnabled else { return "-" }
                if let demo = run.demo, let first = demo.exhaustions.first { return "\(demo.exhaustions.count)× (floor \(mib(first.floorBytes)))" }
                return run.service.exhaustedSeconds > 0 ? "\(String(format: "%.0f", run.service.exhaustedSeconds)) s" : "never"
            },
            row("load shed") { run in
                if let demo = run.demo { return run.memwarnEnabled ? "\(demo.turnedAway) new users turned away" : "-" }
                guard let shed = run.service.shed else { return run.service.metricsScraped ? "no *_shed_total counter" : "-" }
                return "\(Int(shed)) (\(run.service.shedCounters.keys.sorted().joined(separator: ", ")))"
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
        if runs.contains(where: \.killedAtStop) {
            rows.append(row("stopped") { $0.killedAtStop ? "SIGKILL: it ignored SIGTERM for 10 s" : "by SIGTERM" })
        }
        if runs.contains(where: { $0.checkExitCode != nil || $0.loadExitCode != nil }) {
            rows.append(row("load exit status") { run in run.loadExitCode.map(String.init) ?? "-" })
            rows.append(row("check") { run in run.checkExitCode.map { $0 == 0 ? "passed" : "FAILED (status \($0))" } ?? "-" })
        }
        // What survival cost, each figure the service reports (its endpoint's counters, its /metrics).
        let costs: [(String, (SurvivalCost) -> String?)] = [
            ("releases/s", { $0.releasesPerSecond.map { String(format: "%.2f", $0) } }),
            ("released/min", { $0.releasedBytesPerMinute.map(mebibytes) }),
            ("time releasing", { $0.releasingShare.map { String(format: "%.1f %%", $0 * 100) } }),
            ("throughput", { $0.requestsPerSecond.map { String(format: "%.0f requests/s", $0) } }),
            ("cache miss rate", { $0.cacheMissRate.map { String(format: "%.1f %%", $0 * 100) } }),
        ]
        for (name, figure) in costs where runs.contains(where: { figure($0.cost) != nil }) {
            rows.append(row(name) { figure($0.cost) ?? "-" })
        }
        if runs.contains(where: { $0.cost.releasesPerSecond != nil }) {
            rows.append(
                row("thrashing") { run in
                    guard let thrashing = run.cost.thrashing else { return run.cost.releasesPerSecond == nil ? "-" : "no" }
                    return String(format: "YES: %.0f s of releases every second", thrashing.seconds)
                })
        }
        if runs.contains(where: { $0.stall != nil }) {
            rows.append(
                row("memory stall (PSI)") { run in
                    guard let stall = run.stall else { return "-" }
                    return stall.seconds + (stall.source == "cgroup" ? "" : " (system)")
                })
        }
        rows += [
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
        let widths = (0..<rows[0].count).map { column in rows.map { $0[column].count }.max() ?? 0 }
        let lines = rows.map { row in
            String(
                row.enumerated().map { $0.element.padding(toLength: widths[$0.offset], withPad: " ", startingAt: 0) }
                    .joined(separator: "   ").reversed().drop { $0 == " " }.reversed())
        }
        var notes: [String] = []
        if let memwarn = runs.last(where: \.memwarnEnabled) {
            notes.append("trend with memwarn: " + memwarn.trend.summary)
            if let stall = memwarn.stall { notes.append("memory stall with memwarn: " + stall.summary) }
        }
        for run in runs where run.memwarnEnabled && !run.cost.phrases.isEmpty {
            notes.append("cost with memwarn at \(ByteSize.describe(run.memoryMaxBytes)): " + run.cost.phrases.joined(separator: ", "))
        }
        if limits.count > 1 {
            let lowest = { (memwarn: Bool) in
                self.lowestSurvivingLimit(memwarnEnabled: memwarn).map(ByteSize.describe)
                    ?? "none of \(self.limits.map(ByteSize.describe).joined(separator: ", "))"
            }
            notes.append("lowest limit survived: with memwarn \(lowest(true))" + (runs.contains { !$0.memwarnEnabled } ? ", without \(lowest(false))" : ""))
            if let recommended = recommendedLimit, let lowest = lowestComfortableLimit {
                notes.append(
                    "recommended limit, with a \(Int(Self.recommendedMargin * 100)) % margin: \(ByteSize.describe(recommended)) "
                        + "(the lowest survived without thrashing, \(ByteSize.describe(lowest)), plus \(Int(Self.recommendedMargin * 100)) % for a load heavier than this soak's)"
                )
            } else if lowestSurvivingLimit(memwarnEnabled: true) != nil {
                notes.append("no recommended limit: every limit survived with memwarn was survived only by thrashing (releases every second); try larger ones")
            }
        }
        var verdict = self.verdict
        if problem == nil, let reason = runs.first(where: \.memwarnEnabled)?.killReason { verdict += "\n" + reason }
        let title = "memwarn soak: \(subject) under \(limits.map(ByteSize.describe).joined(separator: ", ")) for \(String(format: "%.0f", durationSeconds)) s"
        return ([title, ""] + lines + [""] + notes + ["", verdict]).joined(separator: "\n")
    }

    /// The last line of the text: PASS, FAIL, INTERRUPTED or NOT CARRIED OUT, and why. The
    /// survival of a service memwarn was not in is never credited to memwarn.
    var verdict: String {
        if let signal = interruptedBy { return "INTERRUPTED by signal \(signal): the report is of what ran" }
        if let problem { return "NOT CARRIED OUT: \(problem.description); the report is of what ran" }
        let notInService = "memwarn was not in the service (no memwarn control endpoint answered in its cgroup)"
        guard passed, let memwarn = runs.first(where: { $0.memwarnEnabled && $0.survived }) else {
            return memwarnInService ? "FAIL: with memwarn the service did not survive cleanly" : "FAIL: the service did not survive cleanly; \(notInService)"
        }
        var verdict = memwarnInService ? "PASS: with memwarn the service survived" : "PASS: the service survived"
        if let demo = memwarn.demo {
            verdict += ", with 0 OOM kills and 0 lost writes"
            if demo.turnedAway > 0 { verdict += ", shedding load: \(demo.turnedAway) new users turned away while memory was exhausted" }
        } else {
            verdict += memwarn.checkExitCode == 0 ? ", with 0 OOM kills, and its check passed" : ", with 0 OOM kills"
        }
        if !memwarnInService { verdict += "; \(notInService): its survival is its own, not memwarn's" }
        if let baseline = runs.first(where: { !$0.memwarnEnabled && $0.memoryMaxBytes == memwarn.memoryMaxBytes }) {
            let without = memwarnInService ? "without memwarn it" : "the baseline run"
            verdict +=
                baseline.survived
                ? "; \(without) survived too"
                : "; \(without) did not (\(baseline.killedAfterSeconds.map { "killed after \(String(format: "%.1f", $0)) s" } ?? "failed"))"
        }
        return verdict
    }

    /// The report as one JSON object (`memwarn soak --json`).
    public func json() throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return String(decoding: try encoder.encode(JSONForm(self)), as: UTF8.self)
    }

    /// Every run's samples as one JSON object (`memwarn soak --samples FILE`): usage every
    /// 100 ms, and the floor samples once a second, for an analysis of your own.
    public func samplesJSON() throws -> Data {
        struct RecommendedLimit: Encodable {
            var bytes: UInt64
            var lowestWithoutThrashingBytes: UInt64
            var marginPercent: Int
        }

        struct Run: Encodable {
            var label: String
            var memoryMaxBytes: UInt64
            var usage: [SoakSample]
            var floorSamples: [MemoryTrend.Sample]
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return try encoder.encode([
            "runs": runs.map { Run(label: $0.label, memoryMaxBytes: $0.memoryMaxBytes, usage: $0.run.samples, floorSamples: $0.service.floorSamples) }
        ])
    }

    /// The JSON: the verdict first, and each run without its samples (they are for the plot).
    private struct JSONForm: Encodable {
        var passed: Bool
        var subject: String
        /// Only for one limit: with several, each run's is its own.
        var memoryMaxBytes: UInt64?
        var limits: [UInt64]
        /// `memwarn` and `baseline`, each `null` when no such run survived (or none ran).
        var lowestSurvivingLimit: [String: UInt64?]
        /// With several limits: the lowest survived with memwarn without thrashing, plus the margin.
        var recommendedLimit: RecommendedLimit?
        var durationSeconds: Double
        var interruptedBy: Int32?
        var problem: String?
        var memwarnInService: Bool
        var runs: [Run]

        struct RecommendedLimit: Encodable {
            var bytes: UInt64
            var lowestWithoutThrashingBytes: UInt64
            var marginPercent: Int
        }

        struct Run: Encodable {
            var label: String
            var memwarnEnabled: Bool
            var memoryMaxBytes: UInt64
            var survived: Bool
            var end: String
            var problem: String?
            var killedAfterSeconds: Double?
            var readyAfterSeconds: Double?
            var exitCode: Int32
            var oomKills: UInt64
            var warnings: [String: Int]
            var peakUsageBytes: UInt64?
            var linksMemwarn: Bool
            var releases: Int
            var releasedBytesByTier: [String: Int]
            var releasedBytesByConsumer: [String: Int]
            var exhaustedSeconds: Double
            var shed: Double?
            var loadExitCode: Int32?
            var checkExitCode: Int32?
            var killedAtStop: Bool
            var stall: StallFigures?
            var unitsTerminated: Int
            var exhaustions: Int
            /// The demo's usage right after the release that found nothing more to give, on its
            /// first exhaustion (not the trend's floor, ``MemoryTrend/floorBytes``).
            var exhaustedFloorBytes: Int?
            /// The most memory the service's consumers said was in use at one answer of its
            /// endpoint, and by whom.
            var peakInUse: ServiceFigures.InUsePeak?
            var turnedAway: Int
            var forecastWarnings: Int?
            var falseForecasts: Int?
            var killReason: String?
            var writesAcknowledged: Int?
            var writesVerified: Int?
            var lostWrites: Int?
            var trend: MemoryTrend
            /// The trend in one line, with the reason for a verdict it could not give.
            var trendSummary: String
            var cost: SurvivalCost
        }

        init(_ report: SoakReport) {
            passed = report.passed
            subject = report.subject
            memoryMaxBytes = report.limits.count == 1 ? report.memoryMaxBytes : nil
            limits = report.limits
            lowestSurvivingLimit = [
                "memwarn": report.lowestSurvivingLimit(memwarnEnabled: true), "baseline": report.lowestSurvivingLimit(memwarnEnabled: false),
            ]
            recommendedLimit = report.recommendedLimit.flatMap { bytes in
                report.lowestComfortableLimit.map {
                    RecommendedLimit(bytes: bytes, lowestWithoutThrashingBytes: $0, marginPercent: Int(SoakReport.recommendedMargin * 100))
                }
            }
            durationSeconds = report.durationSeconds
            interruptedBy = report.interruptedBy
            problem = report.problem?.description
            memwarnInService = report.memwarnInService
            runs = report.runs.map { run in
                let demo = run.demo
                return Run(
                    label: run.label, memwarnEnabled: run.memwarnEnabled, memoryMaxBytes: run.memoryMaxBytes, survived: run.survived,
                    end: run.end.rawValue, problem: run.problem, killedAfterSeconds: run.killedAfterSeconds, readyAfterSeconds: run.readyAfterSeconds,
                    exitCode: run.run.exitCode, oomKills: run.run.oomKills, warnings: run.run.warnings, peakUsageBytes: run.run.peakUsageBytes,
                    linksMemwarn: run.service.linksMemwarn, releases: demo.map { $0.releases.count } ?? run.service.releases,
                    releasedBytesByTier: run.releasedByTier, releasedBytesByConsumer: run.service.releasedBytesByConsumer,
                    exhaustedSeconds: run.service.exhaustedSeconds, shed: run.service.shed, loadExitCode: run.loadExitCode,
                    checkExitCode: run.checkExitCode, killedAtStop: run.killedAtStop, stall: run.stall, unitsTerminated: demo?.terminations.count ?? 0,
                    exhaustions: demo?.exhaustions.count ?? 0, exhaustedFloorBytes: demo?.exhaustions.first?.floorBytes, peakInUse: run.service.peakInUse,
                    turnedAway: demo?.turnedAway ?? 0,
                    forecastWarnings: demo?.forecastWarnings ?? (run.service.linksMemwarn ? run.service.forecastWarnings : nil),
                    falseForecasts: demo?.falseForecasts ?? (run.service.linksMemwarn ? run.service.falseForecasts : nil),
                    killReason: run.killReason, writesAcknowledged: demo?.writesAcknowledged, writesVerified: demo?.writesVerified,
                    lostWrites: demo?.lostWrites, trend: run.trend, trendSummary: run.trend.summary, cost: run.cost)
            }
        }
    }
}

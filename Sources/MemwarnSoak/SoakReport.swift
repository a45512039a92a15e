import Foundation
import MemwarnSystem

/// The soak's result: every run side by side, the lowest limit each survived, and the verdict.
package struct SoakReport: Sendable, Codable {
    /// The service soaked: `memwarn-demo`, or the command line.
    package var subject: String
    /// The first (smallest) limit. The JSON has it only for a soak of one limit: with several,
    /// each run has its own (`runs[].memoryMaxBytes`), and `limits` lists them.
    package var memoryMaxBytes: UInt64
    /// Every limit asked for, smallest first.
    package var limits: [UInt64]
    package var durationSeconds: Double
    package var runs: [SoakRun]
    /// The signal that interrupted the soak, if one did: the report is of what ran.
    package var interruptedBy: Int32?
    /// Why the soak could not be carried out to its end, if it could not (a service that never
    /// became ready or exited 0 early, a load that failed at once, a run that could not start):
    /// the report is of what ran.
    package var problem: Soak.SetupError?

    package init(
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
    package var memwarnInService: Bool {
        runs.contains { $0.demo != nil || $0.service.linksMemwarn }
    }

    /// What the runs the soak made with memwarn on had in them, for the report's columns and
    /// lines: `with memwarn`, or `without memwarn` when memwarn was not in the service
    /// (``memwarnInService``): they ran the service as it is, and are named so.
    package var memwarnRunsName: String { memwarnInService ? "with memwarn" : "without memwarn" }

    /// What ran in `run`, as its column is headed: `with memwarn`, `without memwarn (not in the
    /// service)`, or `without (baseline)`.
    ///
    /// - Parameter run: one of the report's runs.
    /// - Returns: the name.
    package func ranName(_ run: SoakRun) -> String {
        guard run.memwarnEnabled else { return "without (baseline)" }
        return memwarnInService ? "with memwarn" : "without memwarn (not in the service)"
    }

    /// The lowest limit at which the run with memwarn (or the baseline) survived, if any did.
    /// `memwarnEnabled` selects the runs made with memwarn on, whether or not memwarn was in
    /// the service (``memwarnRunsName``).
    package func lowestSurvivingLimit(memwarnEnabled: Bool) -> UInt64? {
        runs.filter { $0.memwarnEnabled == memwarnEnabled && $0.survived }.map(\.memoryMaxBytes).min()
    }

    /// The margin the recommended limit adds to the lowest limit survived without thrashing.
    package static let recommendedMargin = 0.25

    /// The lowest limit at which the run with memwarn survived without thrashing, if any did,
    /// among the runs loaded long enough to judge thrashing (``SurvivalCost/judgesThrashing``):
    /// a run too short to judge recommends nothing.
    package var lowestComfortableLimit: UInt64? {
        runs.filter { $0.memwarnEnabled && $0.survivedComfortably && $0.cost.judgesThrashing }.map(\.memoryMaxBytes).min()
    }

    /// With several limits, why no limit is recommended, when none is: every limit survived was
    /// survived only by thrashing, or its run was too short to judge thrashing. `nil` when a limit
    /// is recommended, with one limit, or when no limit was survived.
    package var noRecommendation: String? {
        guard limits.count > 1, recommendedLimit == nil, lowestSurvivingLimit(memwarnEnabled: true) != nil else { return nil }
        let unjudged = runs.filter { $0.memwarnEnabled && $0.survivedComfortably && !$0.cost.judgesThrashing }
        if let run = unjudged.first {
            return String(
                format: "no recommended limit: the run at %@ was loaded %.0f s, too short to judge thrashing (%.0f s or more: "
                    + "a limit survived so briefly may be survived only by releasing every second); soak longer (--limits runs %@ unless --duration is given)",
                ByteSize.describe(run.memoryMaxBytes), run.cost.loadedSeconds, 2 * SurvivalCost.shortestThrashingWindow, Self.defaultLimitsDuration)
        }
        return "no recommended limit: every limit survived was survived only by thrashing (releases every second); try larger ones"
    }

    /// How long each run of `--limits` lasts unless `--duration` is given: long enough to judge
    /// thrashing on a minute's window (``SurvivalCost/thrashingWindow(loadedSeconds:)``).
    package static let defaultLimitsDuration = "2m"

    /// With several limits: the lowest one survived with memwarn without thrashing, plus
    /// ``recommendedMargin`` (rounded up to a whole MiB) — a limit with room for a heavier load
    /// than the soak's, named as such wherever it is shown. `nil` with one limit, or when no limit
    /// was survived without thrashing.
    package var recommendedLimit: UInt64? {
        guard limits.count > 1, let lowest = lowestComfortableLimit else { return nil }
        let mebibyte: UInt64 = 1 << 20
        let padded = UInt64((Double(lowest) * (1 + Self.recommendedMargin)).rounded(.up))
        return (padded + mebibyte - 1) / mebibyte * mebibyte
    }

    /// With memwarn the service survived (at some limit, with several), not interrupted, and its
    /// data held (the demo lost no write; `--check` passed, when given).
    package var passed: Bool {
        guard interruptedBy == nil, problem == nil else { return false }
        return runs.contains { $0.memwarnEnabled && $0.survived && $0.dataHeld != false }
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
}

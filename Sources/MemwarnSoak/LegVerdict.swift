import Foundation
import MemwarnSystem

/// Why a leg could not be carried out before it began to stop its service.
enum LegSetupFailure: Sendable, Equatable {
    /// The service never became ready (why, in words); `endedBeforeReady`: it ended by itself first.
    case notReady(String, endedBeforeReady: Bool)
    /// The load command could not start (why, in words).
    case loadCouldNotStart(String)
}

/// What a leg knew when it began to stop its service: with its run's report, the input of its
/// verdict (``LegVerdict``).
struct LegStopFacts: Sendable, Equatable {
    /// The service's command's first word, for the sentences.
    var commandName: String
    /// Whether the service is a command of the user's (not the demo, which ends itself).
    var isCommand: Bool
    /// The load command, when one was given.
    var loadCommand: String?
    var limitBytes: UInt64
    /// Why the leg ended: the service's own end when it had ended by then, whatever fired first.
    var reason: SoakLeg.Reason
    /// Whether the service had ended by itself when the leg began to stop it.
    var serviceEnded: Bool
    /// Why the leg could not be carried out, when that was known before the stop.
    var setupFailure: LegSetupFailure?
    /// How long the load had run when the leg began to stop (`nil`: no load started).
    var loadRan: Duration?
    /// Seconds from the start until `--duration` was due (`nil`: the service never became ready,
    /// or it is the demo).
    var durationDueSeconds: Double?
    /// How long before `--duration` was due the service may end by itself and have run to the end
    /// (``SoakLeg/finishWindow``).
    var finishWindow: Duration
}

/// How a leg ended and, when it could not be carried out, why: decided from what it recorded,
/// with no I/O. (Why a run with memwarn did not survive is ``SoakRun/killReason``, from the
/// run it makes.)
struct LegVerdict: Sendable, Equatable {
    var end: SoakRun.End
    /// Why the leg could not be carried out (`nil`: it could, whatever its outcome).
    var problem: String?

    /// A verdict given.
    ///
    /// - Parameters:
    ///   - end: how the leg ended.
    ///   - problem: why it could not be carried out, if it could not.
    init(end: SoakRun.End, problem: String?) {
        self.end = end
        self.problem = problem
    }

    /// The verdict as the leg begins to stop its service: it decides whether `--check` runs
    /// (only when there is no problem).
    ///
    /// - Parameter facts: what the leg knew then.
    init(stopping facts: LegStopFacts) {
        switch facts.setupFailure {
        case .notReady(let description, _)?:
            (end, problem) = (.notReady, description)
        case .loadCouldNotStart(let description)?:
            (end, problem) = (.loadFailed, description)
        case nil:
            // The load failing at once is a broken setup, not a result.
            if case .loadEnded(let code) = facts.reason, code != 0, !facts.serviceEnded, let ran = facts.loadRan, ran < SoakLeg.loadStartGrace {
                end = .loadFailed
                problem =
                    "the load command failed at once: it exited with status \(code) within \(SoakLeg.loadStartGrace.seconds) s of its start (`\(facts.loadCommand ?? "")`)"
                return
            }
            switch facts.reason {
            case .serviceExited: end = .serviceExited
            case .loadEnded: end = .loadEnded
            case .duration: end = .duration
            case .interrupted: end = .interrupted
            }
        }
    }

    /// The verdict once the service has ended and its run has been reported.
    ///
    /// - Parameters:
    ///   - facts: what the leg knew when it began to stop the service.
    ///   - report: the service's run.
    init(_ facts: LegStopFacts, exit report: ConstrainedRunReport) {
        self.init(stopping: facts)
        let name = facts.commandName
        let after = String(format: "%.1f", report.durationSeconds)
        if facts.isCommand, end == .serviceExited, report.oomKills == 0, report.exitCode == 0, problem == nil {
            // Near the end (or after it, before the soak stopped it), ending by itself is as good
            // as being stopped then: an outcome, not bad input.
            if let due = facts.durationDueSeconds, report.durationSeconds >= due - facts.finishWindow.seconds {
                end = .finished
            } else {
                problem =
                    "\(name) exited with status 0 after \(after) s, "
                    + (facts.durationDueSeconds.map { "\(String(format: "%.1f", $0 - report.durationSeconds)) s before the soak's end" }
                        ?? "before it was ready")
                    + ": a soaked service must run until it is stopped (or give --duration that ends first)"
            }
        }
        if end == .notReady, report.oomKills > 0 {
            problem = "\(name) was OOM-killed before it was ready: \(ByteSize.describe(facts.limitBytes)) is below what it needs to start"
        } else if case .notReady(_, endedBeforeReady: true)? = facts.setupFailure {
            problem =
                "\(name) exited with \(report.exit.signal.map { "signal \($0)" } ?? "status \(report.exitCode)") "
                + "\(after) s after it started, before it was ready: a soaked service must run until it is stopped"
        }
    }
}

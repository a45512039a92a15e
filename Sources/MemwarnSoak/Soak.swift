import Foundation
package import Logging
package import MemwarnMonitor
package import MemwarnRelease
import MemwarnSystem

/// `memwarn soak`: a service run under a memory limit twice — with memwarn, and without it (the
/// baseline: the same binary with `MEMWARN_DISABLE=1`) — each in its own cgroup through
/// ``ConstrainedRun``, with its load beside it, sampled for the plot, its floor and trend, and
/// its own figures read through memwarn's control endpoint. The service is the demo, or the
/// user's command (``Service``).
package struct Soak: Sendable {
    /// What is soaked.
    package enum Subject: Sendable {
        /// `memwarn-demo` at this path: it runs its own load for the duration, then verifies its writes.
        case demo(path: String)
        /// The user's service.
        case command(Service)
    }

    /// The user's service, how to tell it is ready, its load and its check.
    package struct Service: Sendable {
        /// When the service is ready for its load.
        package enum Readiness: Sendable {
            /// This URL answers 2xx (polled every 100 ms, until the timeout).
            case url(String, timeout: Duration)
            /// This long after it started.
            case after(Duration)
        }

        /// The command and its arguments.
        package var command: [String]
        package var readiness: Readiness
        /// A shell command run outside the limited cgroup once the service is ready, with
        /// `MEMWARN_SOAK_URL` (the ready URL's origin), `MEMWARN_SOAK_PID` and `MEMWARN_SOAK_RUN`
        /// (`memwarn` or `baseline`) in its environment; the run ends when it ends.
        package var load: String?
        /// A shell command run at the end, while the service still runs: its exit status is the
        /// "nothing lost" verdict.
        package var check: String?
        /// The service's Prometheus page, read for its load-shedding counters (default: the
        /// ready URL's origin + `/metrics`, when there is a ready URL).
        package var metricsURL: String?
        /// The shedding counters to read (default: names ending in `_shed_total`).
        package var shedCounters: [String]
        /// The request counters to read for the load's throughput (default: names ending in
        /// `_requests_total`).
        package var requestCounters: [String]
        /// Where the service's, the load's and the check's output go (a descriptor; `nil`: stderr).
        package var outputDescriptor: Int32?

        package init(
            command: [String], readiness: Readiness, load: String? = nil, check: String? = nil, metricsURL: String? = nil,
            shedCounters: [String] = [], requestCounters: [String] = [], outputDescriptor: Int32? = nil
        ) {
            self.command = command
            self.readiness = readiness
            self.load = load
            self.check = check
            self.metricsURL = metricsURL
            self.shedCounters = shedCounters
            self.requestCounters = requestCounters
            self.outputDescriptor = outputDescriptor
        }

        /// The ready URL's parsed address, if any.
        var readyAddress: HTTPGet.Address? {
            guard case .url(let text, _) = readiness, case .success(let address) = HTTPGet.Address.parse(text) else { return nil }
            return address
        }
    }

    /// Why the soak could not be carried out to its end (not why the service did not survive):
    /// the service never became ready, exited 0 early, its load failed at once, or a later run
    /// could not start. It comes in the report of what ran (``SoakReport/problem``); `memwarn
    /// soak` prints that report, then the reason, and exits 2.
    package struct SetupError: Error, Sendable, Codable, CustomStringConvertible, CustomDebugStringConvertible {
        /// The kind of failure: how the leg that could not be carried out ended.
        package struct Code: Sendable, Hashable, Codable, CustomStringConvertible {
            private enum Base: String, Sendable, Hashable, Codable { case notReady, loadFailed, exitedEarly, failed }
            private let base: Base
            private init(_ base: Base) { self.base = base }

            /// The service never became ready (or was OOM-killed before it was).
            package static let notReady = Code(Base.notReady)
            /// The load command could not start, or failed at once.
            package static let loadFailed = Code(Base.loadFailed)
            /// The service exited by itself, successfully, before the soak's end.
            package static let exitedEarly = Code(Base.exitedEarly)
            /// Anything else that kept the leg from being carried out.
            package static let failed = Code(Base.failed)

            /// The code for a leg that ended so.
            ///
            /// - Parameter end: how the leg ended.
            package init(_ end: SoakRun.End) {
                switch end {
                case .notReady: self = .notReady
                case .loadFailed: self = .loadFailed
                case .serviceExited: self = .exitedEarly
                default: self = .failed
                }
            }

            package var description: String { base.rawValue }
        }

        /// The kind of failure.
        package var code: Code
        /// What went wrong, in words.
        package var description: String
        /// The source file that threw it (`#fileID`).
        package var file: String
        /// The line that threw it.
        package var line: Int

        /// An error.
        ///
        /// - Parameters:
        ///   - code: the kind of failure.
        ///   - description: what went wrong, in words.
        ///   - file: where it is thrown; the default is the caller's.
        ///   - line: where it is thrown; the default is the caller's.
        package init(_ code: Code, _ description: String, file: String = #fileID, line: Int = #line) {
            self.code = code
            self.description = description
            self.file = file
            self.line = line
        }

        /// The description, the code and where it was thrown.
        package var debugDescription: String { "\(description) [\(code), thrown at \(file):\(line)]" }
    }

    package var subject: Subject
    /// The limits, each run in turn from the smallest (one for a plain soak).
    package var limits: [UInt64]
    package var duration: Duration
    package var includesBaseline: Bool
    package var sampleInterval: Duration
    package var policy: PressurePolicy
    /// Written every 5 s while the soak runs (best effort, ``SoakPlotFile``), so that an
    /// interrupted soak keeps its evidence; the caller writes the final plot from the report.
    package var plotPath: String?

    package init(
        subject: Subject, limits: [UInt64], duration: Duration, includesBaseline: Bool = true,
        sampleInterval: Duration = .milliseconds(100), policy: PressurePolicy = PressurePolicy(), plotPath: String? = nil
    ) {
        self.subject = subject
        self.limits = limits.sorted()
        self.duration = duration
        self.includesBaseline = includesBaseline
        self.sampleInterval = sampleInterval
        self.policy = policy
        self.plotPath = plotPath
    }

    /// What the live progress line shows.
    package struct Progress: Sendable {
        package var label: String
        package var memoryMaxBytes: UInt64
        package var seconds: Double
        package var usageBytes: UInt64
        package var level: MemoryPressureLevel
        /// Releases the service reported so far (`nil`: it does not report them).
        package var releases: Int?
        /// The trend so far, one line, once there is enough to say something.
        package var trend: String?
    }

    /// A one-time report of what a soak saw: the runs, in the order they ran.
    var subjectName: String {
        switch subject {
        case .demo: "memwarn-demo"
        case .command(let service): service.command.joined(separator: " ")
        }
    }

    /// Runs every leg — at each limit from the smallest, with memwarn then without — until the
    /// interruption says stop, or a leg finds that the soak cannot be carried out. At a limit
    /// past the first, only the runs that have not yet survived without thrashing
    /// (``SoakRun/survivedComfortably``) are run again: a limit survived only by releasing every
    /// second is not where the search stops. A run too short to judge thrashing
    /// (``SurvivalCost/judgesThrashing``) that survived ends it too: a larger limit's run would be
    /// as short, and the report recommends no limit from either.
    ///
    /// - Returns: the report of what ran, whatever ended it: an interrupted soak's
    ///   (``SoakReport/interruptedBy``), and one that could not be carried out to its end, with
    ///   the reason (``SoakReport/problem``).
    /// - Throws: ``ConstrainedRun/StartError`` or `CgroupError` when the first run cannot start
    ///   (nothing ran: there is nothing to report).
    package func run(logger: Logger, interruption: SoakInterruption, progress: @escaping @Sendable (Progress) -> Void) async throws -> SoakReport {
        let labels = includesBaseline ? [true, false] : [true]
        let runs = Locked<[SoakRun]>([])
        let live = Locked<(@Sendable () -> SoakRun)?>(nil)
        let plotting = plotPath.map { path in
            SoakPlotFile(path: path).rewriting(every: .seconds(5)) {
                report(runs.withLock { $0 } + (live.withLock { $0 }.map { [$0()] } ?? []), interruption: nil)
            }
        }
        defer { plotting?.cancel() }
        var survivedComfortably: Set<Bool> = []
        var problem: SetupError?
        legs: for limit in limits {
            for memwarnEnabled in labels where !survivedComfortably.contains(memwarnEnabled) {
                if interruption.signal != nil { break legs }
                let leg = SoakLeg(soak: self, memwarnEnabled: memwarnEnabled, limit: limit, logger: logger)
                let run: SoakRun
                do {
                    run = try await leg.run(interruption: interruption, progress: progress) { partial in live.withLock { $0 = partial } }
                } catch {
                    guard !runs.withLock({ $0.isEmpty }) else { throw error }  // nothing ran: nothing to report
                    problem = SetupError(
                        .failed, "the run \(memwarnEnabled ? "with memwarn" : "without memwarn") under \(ByteSize.describe(limit)) could not start: \(error)")
                    break legs
                }
                runs.withLock { $0.append(run) }
                if run.survivedComfortably { survivedComfortably.insert(memwarnEnabled) }
                // A limit too small to start under is a result when several limits are tried, or for
                // the baseline; every other problem means the soak cannot be carried out.
                let tooSmallToStart = run.end == .notReady && run.run.oomKills > 0
                if let runProblem = run.problem, interruption.signal == nil, !tooSmallToStart || (memwarnEnabled && limits.count == 1) {
                    problem = SetupError(SetupError.Code(run.end), runProblem)
                    break legs
                }
            }
        }
        plotting?.cancel()
        _ = await plotting?.value  // the final plot is the caller's to write, after the last of these
        return report(runs.withLock { $0 }, interruption: interruption.signal, problem: problem)
    }

    private func report(_ runs: [SoakRun], interruption: Int32?, problem: SetupError? = nil) -> SoakReport {
        SoakReport(
            subject: subjectName, memoryMaxBytes: limits.first ?? 0, limits: limits, durationSeconds: duration.seconds,
            runs: runs, interruptedBy: interruption, problem: problem)
    }
}

/// Ctrl-C, SIGTERM, a hang-up or a closed pipe during a soak: the run under way stops its load
/// and its service and reports, and no further run starts.
package final class SoakInterruption: Sendable {
    private let state = Locked<(signal: Int32?, handlers: [@Sendable (Int32) -> Void])>((nil, []))

    package init() {}

    /// The signal that interrupted the soak, if one did.
    package var signal: Int32? { state.withLock { $0.signal } }

    /// Interrupts the soak (the first signal counts; later ones are ignored here).
    package func interrupt(by signal: Int32) {
        let handlers = state.withLock { state -> [@Sendable (Int32) -> Void] in
            guard state.signal == nil else { return [] }
            state.signal = signal
            return state.handlers
        }
        for handler in handlers { handler(signal) }
    }

    /// Calls `handler` on interruption (at once if the soak is interrupted already).
    func onInterrupt(_ handler: @escaping @Sendable (Int32) -> Void) {
        let signal = state.withLock { state -> Int32? in
            if state.signal == nil { state.handlers.append(handler) }
            return state.signal
        }
        if let signal { handler(signal) }
    }
}

import Foundation
import MemwarnTestKit
import Memwarn
#if canImport(Glibc)
import Glibc
#endif

/// `memwarn-bench growth`: whether a service holding only releasable memory survives growth,
/// under `memwarn run --memory-max`, for several peers side by side in one run. The service is
/// `memwarn-growth-probe` (default policy, one unlimited cache of 1 MiB entries, `--total` MiB
/// inserted at each rate); it survives (exit 0) or is OOM-killed (137). The peers differ in how
/// the probe's monitor learns of usage (how it is run) or in how it releases:
///
/// - `events`: memwarn's release loop, the probe run as root: cgroup v1 usage thresholds (after
///   the ~0.3 s they take to register, adaptive sampling before), guard bands below the marks;
/// - `sampling`: the same probe run as nobody (`setpriv`), who may not register v1 thresholds:
///   adaptive sampling, the path of cgroup v2 and of hosts without a limit;
/// - `poll-1s`, `poll-100ms`: as nobody with adaptive sampling off (`MEMWARN_WORST_CASE_GROWTH=0`),
///   usage read every second (what those hosts had before) or every 100 ms;
/// - `rise-only`, `poller`: root, the release before the growth work (on a rise only, to the
///   recovery mark, on the monitor's thread) and a 100 ms thread that releases to the recovery
///   mark at or above the warning mark (the peers of the growth work's own grid).
///
/// Runs are sequential, the peers taking turns at each limit and rate so contention falls on all.
struct GrowthBenchmark {
    /// One way of running the probe.
    struct Peer: Sendable {
        var name: String
        /// The probe's `--releaser`.
        var releaser: String
        /// Run the probe as nobody (`setpriv`).
        var asNobody: Bool
        /// Added to the probe's environment.
        var environment: [String: String]

        static let all = [
            Peer(name: "events", releaser: "memwarn", asNobody: false, environment: [:]),
            Peer(name: "sampling", releaser: "memwarn", asNobody: true, environment: [:]),
            Peer(name: "poll-1s", releaser: "memwarn", asNobody: true, environment: ["MEMWARN_WORST_CASE_GROWTH": "0"]),
            Peer(name: "poll-100ms", releaser: "memwarn", asNobody: true,
                 environment: ["MEMWARN_WORST_CASE_GROWTH": "0", "MEMWARN_POLL_INTERVAL": "100ms"]),
            Peer(name: "rise-only", releaser: "rise-only", asNobody: false, environment: [:]),
            Peer(name: "poller", releaser: "poller", asNobody: false, environment: [:]),
        ]
        static let defaultNames = ["events", "sampling", "poll-1s", "poll-100ms"]

        static func named(_ name: String) -> Peer? { all.first { $0.name == name } }
    }

    /// A run still going after this many times its expected duration (total / rate) is killed.
    static let timeoutFactor = 3.0
    /// The least time a run gets before it counts as hung: start-up (a cgroup made, two processes
    /// started) is not part of total / rate, and at 400 MiB/s three times that is under 4 s.
    static let minimumTimeout = 10.0
    /// The probe's warning mark: it runs the default policy.
    static let warningRatio = PressurePolicy().warningRatio

    var peers: [Peer]
    var limitsMiB: [Int]
    var rates: [Int]
    var totalMiB: Int
    var repeats: Int
    var cli: String
    var probe: String

    /// Reads the two executables' paths from `MEMWARN_CLI` and `MEMWARN_GROWTH_PROBE`.
    init(peers: [Peer], limitsMiB: [Int], rates: [Int], totalMiB: Int, repeats: Int) throws {
        let environment = ProcessInfo.processInfo.environment
        guard let cli = environment["MEMWARN_CLI"], !cli.isEmpty,
              let probe = environment["MEMWARN_GROWTH_PROBE"], !probe.isEmpty else {
            throw BenchmarkError("growth needs MEMWARN_CLI (the memwarn executable) and MEMWARN_GROWTH_PROBE (memwarn-growth-probe) "
                                 + "set to release builds of the root's products; Benchmarks/run builds them and sets both")
        }
        for path in [cli, probe] where access(path, X_OK) != 0 {
            throw BenchmarkError("\(path) is not an executable file (from MEMWARN_CLI / MEMWARN_GROWTH_PROBE)")
        }
        (self.peers, self.limitsMiB, self.rates, self.totalMiB, self.repeats, self.cli, self.probe) = (peers, limitsMiB, rates, totalMiB, repeats, cli, probe)
    }

    /// How a run ended.
    enum Ending {
        case survived
        case oomKilled
        /// Killed by the benchmark after `after` seconds.
        case timedOut(after: Double)
        /// Any other exit status, with the last line memwarn run or the probe wrote to stderr.
        case failed(status: Int32, reason: String)

        var cell: String {
            switch self {
            case .survived: "ok"
            case .oomKilled: "OOM"
            case .timedOut: "timeout"
            case .failed(let status, _): "exit \(status)"
            }
        }
    }

    /// One run of the probe under `memwarn run`, and what its JSON lines said.
    struct Run {
        /// The peer's name.
        var releaser: String
        /// Whether the peer runs memwarn's release loop (forecasts and releases are reported).
        var runsMemwarn: Bool
        /// How the probe's monitor watched usage (its `armed` line), e.g. `thresholds`.
        var usageWatch: String?
        var limitMiB: Int
        var rate: Int
        var repeatIndex: Int
        var ending: Ending
        var status: Int32
        var seconds: Double
        /// Release reports (`release` lines), and how long each took.
        var releaseMicros: [Int]
        /// The usage and time (s since the probe started) of the first `level` line from the forecast.
        var forecastUsage: Double?
        var forecastTime: Double?
        /// The forecast's own estimate of the time left to the limit, in that line.
        var forecastSecondsToLimit: Double?
        /// `forecasts` of the `done` line; `nil` when the probe did not finish.
        var forecasts: (raised: Int, confirmed: Int, falseAlarms: Int)?

        var survived: Bool { if case .survived = ending { true } else { false } }

        /// Seconds from the forecast warning to when usage reaches the warning mark at this rate:
        /// (warning ratio × limit − usage in the forecast's line) / rate.
        var forecastLead: Double? {
            forecastUsage.map { (GrowthBenchmark.warningRatio * Double(limitMiB << 20) - $0) / Double(rate << 20) }
        }
    }

    func expectedSeconds(rate: Int) -> Double { Double(totalMiB) / Double(rate) }

    func timeout(rate: Int) -> Double { Swift.max(Self.timeoutFactor * expectedSeconds(rate: rate), Self.minimumTimeout) }

    func run(progress: (String) -> Void) throws -> Result {
        var runs: [Run] = []
        for limit in limitsMiB {
            for rate in rates {
                for repeatIndex in 0..<repeats {
                    for peer in peers {
                        let run = try self.run(peer, limitMiB: limit, rate: rate, repeatIndex: repeatIndex)
                        var line = "\(limit) MiB, \(rate) MiB/s, \(peer.name)\(repeats > 1 ? " #\(repeatIndex + 1)" : ""): \(run.ending.cell) after \(fixed(run.seconds, 1)) s"
                        line += ", \(run.releaseMicros.count) releases"
                        if case .timedOut = run.ending { line += " (limit \(fixed(timeout(rate: rate), 1)) s)" }
                        if case .failed(_, let reason) = run.ending { line += " (\(reason))" }
                        progress(line)
                        runs.append(run)
                    }
                }
            }
        }
        return Result(benchmark: self, runs: runs)
    }

    /// Runs `memwarn run --memory-max <limit>M -- memwarn-growth-probe ...` to its end, or kills it at the time limit.
    private func run(_ peer: Peer, limitMiB: Int, rate: Int, repeatIndex: Int) throws -> Run {
        let files = FileManager.default.temporaryDirectory.appendingPathComponent("memwarn-bench-\(getpid())-growth")
        let outputPath = files.path + ".out", errorPath = files.path + ".err"
        for path in [outputPath, errorPath] where !FileManager.default.createFile(atPath: path, contents: nil) {
            throw BenchmarkError("cannot create \(path)")
        }
        defer { for path in [outputPath, errorPath] { try? FileManager.default.removeItem(atPath: path) } }

        // Files, not pipes: with two pipes one could fill while the other is read.
        let process = Process()
        process.executableURL = URL(fileURLWithPath: cli)
        process.arguments = ["run", "--memory-max", "\(limitMiB)M", "--"] + (peer.asNobody ? ChildProcess.asNobody : [])
            + [probe, "--rate", "\(rate)", "--total", "\(totalMiB)", "--releaser", peer.releaser]
        process.environment = ProcessInfo.processInfo.environment.merging(peer.environment) { $1 }
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: outputPath))
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: errorPath))
        let began = ContinuousClock.now
        try process.run()
        let limit = timeout(rate: rate)
        var timedOut = false
        if !waitForExit(process, seconds: limit) {
            timedOut = true
            // memwarn run passes a SIGTERM on to the probe and kills it on a second one, then
            // removes its cgroup; SIGKILL is the last resort (it would leave the cgroup behind).
            process.terminate()
            if !waitForExit(process, seconds: 5) {
                process.terminate()
                if !waitForExit(process, seconds: 5) { kill(process.processIdentifier, SIGKILL) }
            }
            process.waitUntilExit()
        }
        let seconds = (ContinuousClock.now - began) / .seconds(1)
        let status = process.terminationReason == .uncaughtSignal ? 128 + process.terminationStatus : process.terminationStatus
        let errors = (try? String(contentsOfFile: errorPath, encoding: .utf8)) ?? ""
        let ending: Ending
        if timedOut {
            ending = .timedOut(after: seconds)
        } else if status == 0 {
            ending = .survived
        } else if status == 137 {
            ending = .oomKilled
        } else {
            let last = errors.split(separator: "\n").last.map(String.init) ?? "no message"
            ending = .failed(status: status, reason: last)
        }
        var run = Run(releaser: peer.name, runsMemwarn: peer.releaser == "memwarn", limitMiB: limitMiB, rate: rate, repeatIndex: repeatIndex,
                      ending: ending, status: status, seconds: seconds, releaseMicros: [])
        let output = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
        run.read(probeOutput: output)
        return run
    }

    /// Whether the process ended within `seconds` (polled every 20 ms: a bound, not a measurement).
    private func waitForExit(_ process: Process, seconds: Double) -> Bool {
        let deadline = ContinuousClock.now + .seconds(seconds)
        while process.isRunning {
            guard ContinuousClock.now < deadline else { return false }
            usleep(20_000)
        }
        return true
    }
}

extension GrowthBenchmark.Run {
    /// Takes the figures from the probe's JSON lines (`level`, `release`, `done`; others ignored).
    mutating func read(probeOutput: String) {
        func number(_ value: Any?) -> Double? { (value as? NSNumber)?.doubleValue }
        for line in probeOutput.split(separator: "\n") {
            guard let event = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else { continue }
            switch event["event"] as? String {
            case "armed":
                usageWatch = event["usageWatch"] as? String
            case "level" where forecastTime == nil && event["source"] as? String == "forecast":
                forecastUsage = number(event["usage"])
                forecastTime = number(event["t"])
                forecastSecondsToLimit = number(event["secondsToLimit"])
            case "release":
                releaseMicros.append(Int(number(event["micros"]) ?? 0))
            case "done":
                let tally = event["forecasts"] as? [String: Any] ?? [:]
                forecasts = (Int(number(tally["raised"]) ?? 0), Int(number(tally["confirmed"]) ?? 0), Int(number(tally["false"]) ?? 0))
            default:
                break
            }
        }
    }
}

extension GrowthBenchmark {
    /// Every run, and the tables made from them.
    struct Result {
        var benchmark: GrowthBenchmark
        var runs: [Run]

        func runs(_ releaser: String, limitMiB: Int, rate: Int) -> [Run] {
            runs.filter { $0.releaser == releaser && $0.limitMiB == limitMiB && $0.rate == rate }
        }

        /// `ok`, `OOM` or `timeout` when every repeat ended alike, else how many survived.
        func cell(_ releaser: String, limitMiB: Int, rate: Int) -> String {
            let runs = runs(releaser, limitMiB: limitMiB, rate: rate)
            guard let first = runs.first else { return "-" }
            if runs.allSatisfy({ $0.ending.cell == first.ending.cell }) { return first.ending.cell }
            return "\(runs.filter(\.survived).count)/\(runs.count) ok"
        }

        /// The highest rate at which every run survived, with every lower rate survived too, or `nil`.
        func highest(_ releaser: String, limitMiB: Int) -> Int? {
            var best: Int?
            for rate in benchmark.rates.sorted() {
                let runs = runs(releaser, limitMiB: limitMiB, rate: rate)
                guard !runs.isEmpty, runs.allSatisfy(\.survived) else { break }
                best = rate
            }
            return best
        }

        var memwarnRuns: [Run] { runs.filter(\.runsMemwarn) }
        /// Forecast leads of the memwarn runs, in nanoseconds (for ``LatencySummary``).
        var leads: LatencySummary { LatencySummary(memwarnRuns.compactMap(\.forecastLead).map { Int64($0 * 1e9) }) }
        /// The memwarn runs' release durations, in nanoseconds.
        var releaseDurations: LatencySummary { LatencySummary(memwarnRuns.flatMap(\.releaseMicros).map { Int64($0) * 1_000 }) }
        var falseForecasts: Int { memwarnRuns.compactMap { $0.forecasts?.falseAlarms }.reduce(0, +) }
        var finishedMemwarnRuns: Int { memwarnRuns.filter { $0.forecasts != nil }.count }
    }
}

extension GrowthBenchmark.Result {
    private func seconds(_ nanoseconds: Int64) -> String { fixed(Double(nanoseconds) / 1e9, 2) }
    private func micros(_ nanoseconds: Int64) -> String { String(nanoseconds / 1_000) }

    var report: String {
        let rates = benchmark.rates, limits = benchmark.limitsMiB, releasers = benchmark.peers.map(\.name)
        var grid = [["peer", "limit"] + rates.map { "\($0) MiB/s" }]
        for limit in limits {
            for releaser in releasers { grid.append([releaser, "\(limit) MiB"] + rates.map { cell(releaser, limitMiB: limit, rate: $0) }) }
        }
        var highestRows = [["peer"] + limits.map { "\($0) MiB" }]
        for releaser in releasers { highestRows.append([releaser] + limits.map { highest(releaser, limitMiB: $0).map { "\($0) MiB/s" } ?? "none" }) }
        var memwarnRows = [["peer", "watch", "limit", "rate", "ending", "forecast at s", "usage then MiB", "lead s", "forecasts raised/confirmed/false", "releases", "median release µs"]]
        for run in memwarnRuns {
            memwarnRows.append([
                run.releaser, run.usageWatch ?? "-", "\(run.limitMiB) MiB", "\(run.rate) MiB/s" + (benchmark.repeats > 1 ? " #\(run.repeatIndex + 1)" : ""), run.ending.cell,
                run.forecastTime.map { fixed($0, 2) } ?? "-", run.forecastUsage.map { fixed($0 / 1_048_576, 1) } ?? "-",
                run.forecastLead.map { fixed($0, 2) } ?? "-",
                run.forecasts.map { "\($0.raised)/\($0.confirmed)/\($0.falseAlarms)" } ?? "-",
                String(run.releaseMicros.count),
                run.releaseMicros.isEmpty ? "-" : micros(LatencySummary(run.releaseMicros.map { Int64($0) * 1_000 }).percentile(50)),
            ])
        }
        let warning = Int((GrowthBenchmark.warningRatio * 100).rounded())
        let leads = self.leads, releases = releaseDurations
        let leadLine = leads.count == 0 ? "forecast lead: no memwarn run raised a forecast warning" :
            "forecast lead: min \(seconds(leads.min)) s, median \(seconds(leads.percentile(50))) s, max \(seconds(leads.max)) s over \(leads.count) of \(memwarnRuns.count) memwarn runs"
        let notes = runs.compactMap { run -> String? in
            let name = "\(run.limitMiB) MiB, \(run.rate) MiB/s, \(run.releaser)"
            switch run.ending {
            case .timedOut(let after): return "  \(name): timeout, killed after \(fixed(after, 1)) s (limit \(fixed(benchmark.timeout(rate: run.rate), 1)) s, expected \(fixed(benchmark.expectedSeconds(rate: run.rate), 1)) s)"
            case .failed(let status, let reason): return "  \(name): exit \(status): \(reason)"
            default: return nil
            }
        }
        return """
        growth: memwarn-growth-probe (default policy, one unlimited DiscardableCache of 1 MiB entries) inserting \(benchmark.totalMiB) MiB at each rate
        under memwarn run --memory-max, sequentially, \(benchmark.repeats) run\(benchmark.repeats == 1 ? "" : "s") a cell; wall time \(fixed(runs.reduce(0) { $0 + $1.seconds }, 1)) s in runs
        peers: events = root (v1 thresholds; sampling until they are registered), sampling = as nobody (adaptive sampling),
        poll-1s / poll-100ms = as nobody with adaptive sampling off (worst_case_growth = 0; poll_interval 1s / 100ms),
        rise-only = release on a rise only (root), poller = a 100 ms thread releasing at the warning mark (root)
        ok = exit 0, OOM = OOM-killed (exit 137), timeout = killed after \(fixed(GrowthBenchmark.timeoutFactor, 0)) × total / rate (at least \(fixed(GrowthBenchmark.minimumTimeout, 0)) s)

        \(table(grid))

        highest rate survived (every run at it and at every lower rate exited 0):
        \(table(highestRows))

        memwarn's release loop, run by run (watch = how the probe's monitor watched usage when armed; forecast at = first level line from the forecast, s after the probe started;
        lead = (\(warning) % of the limit - usage then) / rate, the time the forecast warning came before usage would reach the warning mark):
        \(table(memwarnRows))

        \(leadLine)
        false forecast warnings (forecasts.false of the done lines): \(falseForecasts) in \(finishedMemwarnRuns) finished memwarn runs
        memwarn releases: \(releases.count), median \(releases.count == 0 ? "-" : micros(releases.percentile(50))) µs, max \(releases.count == 0 ? "-" : micros(releases.max)) µs
        """ + (notes.isEmpty ? "" : "\n\nruns that neither survived nor were OOM-killed:\n" + notes.joined(separator: "\n"))
    }

    var json: JSON {
        func optional(_ value: Double?, _ digits: Int) -> JSON { value.map { .double($0, digits: digits) } ?? .raw("null") }
        let leads = self.leads, releases = releaseDurations
        return .object([
            ("benchmark", .string("growth")),
            ("total_mib", .number(benchmark.totalMiB)),
            ("repeats", .number(benchmark.repeats)),
            ("warning_ratio", .double(GrowthBenchmark.warningRatio, digits: 2)),
            ("timeout_factor", .double(GrowthBenchmark.timeoutFactor, digits: 1)),
            ("minimum_timeout_s", .double(GrowthBenchmark.minimumTimeout, digits: 1)),
            ("runs", .array(runs.map { run in
                var members: [(String, JSON)] = [
                    ("peer", .string(run.releaser)), ("usage_watch", run.usageWatch.map { .string($0) } ?? .raw("null")), ("limit_mib", .number(run.limitMiB)), ("rate_mib_s", .number(run.rate)),
                    ("repeat", .number(run.repeatIndex + 1)), ("outcome", .string(run.ending.cell)), ("survived", .bool(run.survived)),
                    ("exit_status", .number(Int(run.status))), ("seconds", .double(run.seconds, digits: 3)),
                    ("expected_seconds", .double(benchmark.expectedSeconds(rate: run.rate), digits: 3)),
                    ("releases", .number(run.releaseMicros.count)),
                    ("release_micros_median", run.releaseMicros.isEmpty ? .raw("null") : .int(LatencySummary(run.releaseMicros.map(Int64.init)).percentile(50))),
                    ("forecast_t_s", optional(run.forecastTime, 3)),
                    ("forecast_usage_bytes", optional(run.forecastUsage, 0)),
                    ("forecast_seconds_to_limit", optional(run.forecastSecondsToLimit, 3)),
                    ("forecast_lead_s", optional(run.forecastLead, 3)),
                ]
                if let forecasts = run.forecasts {
                    members.append(("forecasts", .object([("raised", .number(forecasts.raised)), ("confirmed", .number(forecasts.confirmed)), ("false", .number(forecasts.falseAlarms))])))
                }
                if case .failed(_, let reason) = run.ending { members.append(("reason", .string(reason))) }
                return .object(members)
            })),
            ("highest", .array(benchmark.limitsMiB.flatMap { limit in benchmark.peers.map(\.name).map { releaser in
                .object([("peer", .string(releaser)), ("limit_mib", .number(limit)),
                         ("rate_mib_s", highest(releaser, limitMiB: limit).map { .number($0) } ?? .raw("null"))])
            } })),
            ("memwarn", .object([
                ("forecast_lead_s", leads.count == 0 ? .raw("null") : .object([
                    ("runs", .number(leads.count)), ("min", .double(Double(leads.min) / 1e9, digits: 3)),
                    ("median", .double(Double(leads.percentile(50)) / 1e9, digits: 3)), ("max", .double(Double(leads.max) / 1e9, digits: 3)),
                ])),
                ("false_forecasts", .number(falseForecasts)),
                ("finished_runs", .number(finishedMemwarnRuns)),
                ("releases", .number(releases.count)),
                ("release_micros_median", releases.count == 0 ? .raw("null") : .int(releases.percentile(50) / 1_000)),
            ])),
        ])
    }
}

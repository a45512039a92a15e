import ArgumentParser
import CgroupKit
import Foundation
import Logging
import MemwarnMonitor
import MemwarnSoak
import MemwarnSystem
import UnixSignals

/// `memwarn soak`: a service — the demo, or yours — with and without memwarn, under the same limit.
struct SoakCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "soak",
        abstract: "Run a service under a memory limit with memwarn and without, with its load; compare, find its floor, judge leaks.",
        discussion: """
            With no command, soaks memwarn-demo (built beside memwarn, or $MEMWARN_DEMO), which \
            runs its own load. With -- CMD, soaks your service: each run starts CMD in a new \
            cgroup under the limit (as memwarn run does), waits until it is ready (--ready-url \
            answers 2xx, or --ready-after), starts --load outside the limit with \
            MEMWARN_SOAK_URL, MEMWARN_SOAK_PID and MEMWARN_SOAK_RUN in its environment, and \
            runs until --duration has passed or the load ends; then --check runs (its status is \
            the "nothing lost" verdict), the service gets SIGTERM (SIGKILL 10 s later) and the \
            load's process group likewise. The baseline is the same command with \
            MEMWARN_DISABLE=1: memwarn linked but off. When the service serves memwarn's \
            control endpoint, the report shows its releases by tier and consumer, exhausted \
            time and forecasts; its /metrics (the ready URL's, or --metrics-url) give load shed \
            (counters named *_shed_total, or --shed-counter). Every run reports its floor and a \
            trend: steady, warming up, leaking (MiB/min, confidence), retained by the \
            allocator, cannot tell yet (a rise that slows without flattening, or too small in \
            half the soak: a cache filling to its cap or a leak; soak longer), or unknown (no \
            control endpoint, and its memory fell under pressure: \
            the caches cannot be told from the floor). Every run reports what survival cost: \
            releases a second, bytes released a minute, time spent releasing, throughput \
            (*_requests_total, or --request-counter) and cache miss rate \
            (*_cache_hits_total and *_cache_misses_total) from /metrics; releases every second \
            for half the loaded time (a minute at most) are flagged THRASHING; a run loaded \
            under 40 s is too short to judge. --limits runs the pair at each limit from the \
            smallest until one survives without thrashing (each run 2m unless --duration is \
            given), reports the lowest each survives and recommends a limit with a 25 % margin \
            over the lowest survived without thrashing, never from a run too short to judge. A service that exits 0 by itself at most 10 s (or a tenth \
            of --duration) before its end ran to the end. A service no memwarn control endpoint \
            answered for is reported as one memwarn was not in: its survival is not memwarn's. \
            A progress line on stderr; --plot is rewritten every 5 s.
            Whatever ends the soak once a run has started — its end, a failure, bad input found \
            then, Ctrl-C or SIGTERM (the service and the load stopped, the cgroups removed) — \
            the report of what ran is printed (and --plot, --samples written), with the reason.
            Killed itself (SIGKILL, the OOM killer), the soak cannot clean up: the service and \
            the load's shell die with it, and what they started lives on in the soak's cgroups \
            until the next memwarn soak, run or status started in the same cgroup kills it and \
            removes them — at the latest when the next soak starts.
            Exit status:
              0      the service survived (at some limit, with memwarn) and its data held
              1      it did not: OOM-killed, crashed, a --check or the demo's verification failed
              2      the soak could not be carried out: the command was not found, never became
                     ready, exited 0 early, its load failed at once, the limit is below what it
                     needs to start (with --limits that is a result, at that limit), no cgroup
                     could be made, or the plot or samples file could not be written
                     (once a run has started, its report is printed all the same)
              64     bad arguments
              128+N  interrupted by signal N (the report of what ran is printed)
            Examples:
              memwarn soak
              memwarn soak --memory-max 256M --duration 60s --plot soak.svg
              memwarn soak --memory-max 192M --duration 10m --ready-url http://127.0.0.1:8080/healthz \\
                  --load 'python3 load.py --url "$MEMWARN_SOAK_URL"' -- ./my-service --port 8080
              memwarn soak --limits 128M,192M,256M --duration 5m --ready-after 2s --load ./load.sh -- ./my-service
            """)

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("The limit for each run.", valueName: "size"))
    var memoryMax: String?

    @Option(
        name: .long, parsing: .unconditional,
        help: ArgumentHelp(
            "Several limits, comma-separated: the pair runs at each from the smallest; the report names the lowest each survives.", valueName: "sizes"))
    var limits: String?

    @Option(
        name: .long, parsing: .unconditional,
        help: ArgumentHelp(
            "How long each run lasts: 60s, 90, 2m, 1.5h (the demo's load; your service's from ready, unless its load ends first); "
                + "default 60s, and \(SoakReport.defaultLimitsDuration) with --limits (long enough to judge thrashing on a minute).", valueName: "time"))
    var duration: String?

    /// `--duration`, or its default: 60 s, or ``SoakReport/defaultLimitsDuration`` with `--limits`.
    private var durationText: String { duration ?? (limits != nil ? SoakReport.defaultLimitsDuration : "60s") }

    @Option(
        name: .long,
        help: ArgumentHelp("Your service is ready when this http:// URL (an IP address or localhost) answers 2xx (polled every 100 ms).", valueName: "url"))
    var readyUrl: String?

    @Option(
        name: .long, parsing: .unconditional,
        help: ArgumentHelp("Your service is ready this long after it started (default 2s when there is no --ready-url).", valueName: "time"))
    var readyAfter: String?

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("How long --ready-url may take to answer.", valueName: "time"))
    var readyTimeout = "60s"

    @Option(name: .long, help: ArgumentHelp("A shell command that loads your service, run outside the limit once it is ready.", valueName: "command"))
    var load: String?

    @Option(
        name: .long, help: ArgumentHelp("A shell command run at the end while your service still runs: exit 0 when its data is intact.", valueName: "command"))
    var check: String?

    @Option(name: .long, help: ArgumentHelp("Your service's Prometheus page (default: the ready URL's origin + /metrics).", valueName: "url"))
    var metricsUrl: String?

    @Option(name: .long, help: ArgumentHelp("A counter of requests your service shed (repeatable; default: every *_shed_total).", valueName: "name"))
    var shedCounter: [String] = []

    @Option(
        name: .long,
        help: ArgumentHelp("A counter of requests your service served, for its throughput (repeatable; default: every *_requests_total).", valueName: "name"))
    var requestCounter: [String] = []

    @Option(name: .long, help: ArgumentHelp("Write your service's, the load's and the check's output here (default: stderr).", valueName: "file"))
    var serviceLog: String?

    @Flag(name: .long, help: "Print the report as JSON (the progress line still goes to stderr).")
    var json = false

    @Option(
        name: .long, help: ArgumentHelp("Write an SVG plot of usage against the limit over time for every run (rewritten every 5 s).", valueName: "file.svg"))
    var plot: String?

    @Option(name: .long, help: ArgumentHelp("Write every run's samples as JSON: usage every 100 ms, the floor once a second.", valueName: "file.json"))
    var samples: String?

    @Flag(name: .long, help: "Skip the runs without memwarn.")
    var noBaseline = false

    @Argument(parsing: .postTerminator, help: ArgumentHelp("Your service's command and its arguments, after --.", valueName: "command"))
    var command: [String] = []

    func validate() throws {
        _ = try limitBytes()
        guard let seconds = Self.parseSeconds(durationText) else {
            throw ValidationError("--duration: \(InvalidValueMessage.notADuration(durationText)) (examples: 60s, 90, 2m, 1.5h)")
        }
        guard Self.durationRange.contains(seconds) else {
            throw ValidationError("--duration: \(durationText) is out of range: a soak runs from 1s to 24h (86400s)")
        }
        if command.isEmpty {
            let serviceOptions = [
                ("--ready-url", readyUrl), ("--ready-after", readyAfter), ("--load", load), ("--check", check),
                ("--metrics-url", metricsUrl), ("--service-log", serviceLog),
            ]
            if let given = serviceOptions.first(where: { $0.1 != nil }) {
                throw ValidationError("\(given.0) is for your service: give its command after --, as in memwarn soak \(given.0) … -- ./my-service")
            }
            return
        }
        if readyUrl != nil && readyAfter != nil { throw ValidationError("give --ready-url or --ready-after, not both") }
        for (name, url) in [("--ready-url", readyUrl), ("--metrics-url", metricsUrl)] {
            if let url, case .failure(let problem) = HTTPGet.Address.parse(url) { throw ValidationError("\(name): \(url): \(problem)") }
        }
        for (name, text) in [("--ready-after", readyAfter), ("--ready-timeout", readyTimeout as String?)] {
            guard let text else { continue }
            guard let seconds = Self.parseSeconds(text) else {
                throw ValidationError("\(name): \(InvalidValueMessage.notADuration(text)) (examples: 2s, 500ms is 0.5s, 1m)")
            }
            guard (0...3_600).contains(seconds) else { throw ValidationError("\(name): \(text) is out of range: it takes 0 to 1h") }
        }
        for (name, text) in [("--load", load), ("--check", check)] where text?.trimmingCharacters(in: .whitespaces).isEmpty == true {
            throw ValidationError("\(name) is empty: give a shell command")
        }
    }

    /// `--limits` or `--memory-max` (default 256M), each at least 1M.
    private func limitBytes() throws -> [UInt64] {
        if limits != nil && memoryMax != nil { throw ValidationError("give --memory-max or --limits, not both") }
        let name = limits != nil ? "--limits" : "--memory-max"
        let texts = (limits ?? memoryMax ?? "256M").split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
        var bytes: [UInt64] = []
        for text in texts {
            guard let size = ByteSize.parse(text, allowingZero: true) else {
                throw ValidationError("\(name): \(InvalidValueMessage.notASize(text)) (examples: 256M, 1G\(limits != nil ? "; several: 128M,192M,256M" : ""))")
            }
            guard size >= ByteSize.smallestLimit else { throw ValidationError("\(name): \(text) is below the smallest limit, 1M") }
            bytes.append(size)
        }
        guard Set(bytes).count == bytes.count else { throw ValidationError("\(name): a limit is given twice") }
        guard bytes.count <= 16 else { throw ValidationError("\(name): at most 16 limits") }
        return bytes.sorted()
    }

    /// The soak's shortest and longest load, in seconds: under a second the demo cannot start and
    /// verify; past a day the run is a mistake (and `1e16` would overflow the clock).
    static let durationRange: ClosedRange<Double> = 1...86_400

    /// `60s`, `90`, `2m`, `1.5h` in seconds, when in ``durationRange``.
    static func seconds(_ text: String) -> Double? {
        parseSeconds(text).flatMap { durationRange.contains($0) ? $0 : nil }
    }

    /// `60s`, `90`, `2m`, `1.5h` in seconds (any finite, non-negative number).
    private static func parseSeconds(_ text: String) -> Double? {
        let scales: [Character: Double] = ["s": 1, "m": 60, "h": 3_600]
        let scale = text.last.flatMap { scales[$0] }
        let number = Double(scale == nil ? text : String(text.dropLast()))
        guard let number, number.isFinite, number >= 0 else { return nil }
        return number * (scale ?? 1)
    }

    func run() async throws {
        let environment = ProcessInfo.processInfo.environment
        var logger = Logger(label: "memwarn")
        logger.logLevel = .error
        let limitBytes = try limitBytes()
        let seconds = Self.seconds(durationText) ?? 60
        let subject: Soak.Subject
        var log: FileHandle?
        if command.isEmpty {
            subject = .demo(path: try Self.demoPath())
        } else {
            if let serviceLog {
                guard FileManager.default.createFile(atPath: serviceLog, contents: nil), let handle = FileHandle(forWritingAtPath: serviceLog) else {
                    Output.errorLine("Error: cannot write the service's output to \(serviceLog): \(String(cString: strerror(errno)))")
                    throw ExitCode(2)
                }
                log = handle
            }
            let readiness: Soak.Service.Readiness =
                readyUrl.map { .url($0, timeout: .milliseconds(Int64((Self.parseSeconds(readyTimeout) ?? 60) * 1_000))) }
                ?? .after(.milliseconds(Int64((readyAfter.flatMap(Self.parseSeconds) ?? 2) * 1_000)))
            subject = .command(
                Soak.Service(
                    command: command, readiness: readiness, load: load, check: check, metricsURL: metricsUrl,
                    shedCounters: shedCounter, requestCounters: requestCounter, outputDescriptor: log?.fileDescriptor))
        }
        let soak = Soak(
            subject: subject, limits: limitBytes, duration: .milliseconds(Int64(seconds * 1_000)), includesBaseline: !noBaseline,
            policy: try PressurePolicy.load(environment: environment), plotPath: plot)
        let plotFile = plot.map(SoakPlotFile.init(path:))
        if let plotFile, !plotFile.create() {
            Output.errorLine("Error: cannot write the plot to \(plotFile.path): \(String(cString: strerror(errno)))")
            throw ExitCode(2)
        }
        // Trapped before anything starts (children get the default dispositions back before
        // exec): Ctrl-C, SIGTERM, a hang-up or a closed output pipe stop the run under way.
        let interruption = SoakInterruption()
        let signals = await UnixSignalsSequence(trapping: .sigint, .sigterm, .sighup, .sigpipe)
        let listening = Task {
            for await signal in signals { interruption.interrupt(by: signal.rawValue) }
        }
        defer { listening.cancel() }
        let line = ProgressLine(total: seconds)
        let report: SoakReport
        do {
            report = try await soak.run(logger: logger, interruption: interruption) { line.show($0) }
        } catch let error as CgroupError where error.code == .permissionDenied {
            line.finish()
            Output.errorLine("Error: \(error.message)")
            throw ExitCode(2)
        } catch {
            line.finish()
            Output.errorLine("Error: \(error)")
            throw ExitCode(2)
        }
        line.finish()
        try? log?.close()
        // From here on, whatever ended the soak, the report of what ran is written; the errors
        // follow it.
        var errors: [String] = report.problem.map { [$0.description] } ?? []
        if let plotFile {
            do {
                try plotFile.write(report)
                Output.errorLine("memwarn soak: plot written to \(plotFile.path)")
            } catch {
                errors.append("cannot write the plot to \(plotFile.path): \(error)")
            }
        }
        if let samples {
            do {
                // A new file renamed over the name: a symbolic link there is replaced, never written through.
                try FileSystem.replaceFile(samples, with: report.samplesJSON(), mode: 0o644)
            } catch let error as SystemError {
                errors.append("cannot write the samples to \(samples): \(error.reason)")
            } catch {
                errors.append("cannot write the samples to \(samples): \(error)")
            }
        }
        Output.line(json ? try report.json() : report.text)
        for error in errors { Output.errorLine("Error: \(error)") }
        if let signal = report.interruptedBy { throw ExitCode(128 + signal) }
        if !errors.isEmpty { throw ExitCode(2) }
        if !report.passed { throw ExitCode(1) }
    }

    /// `memwarn-demo` beside this executable, or `$MEMWARN_DEMO`.
    static func demoPath() throws -> String {
        if let path = ProcessInfo.processInfo.environment["MEMWARN_DEMO"] { return path }
        let path = ExecutablePath.sibling("memwarn-demo")
        guard ExecutablePath.isExecutableFile(path) else {
            throw ValidationError("memwarn-demo is not built beside memwarn (\(path)); build it with: swift build --product memwarn-demo, or set MEMWARN_DEMO")
        }
        return path
    }
}

/// The live progress line on stderr: rewritten in place on a terminal, a line every 5 s otherwise.
final class ProgressLine: Sendable {
    private let total: Double
    private let isTerminal = StandardStream.error.isTerminal
    private let lastPrinted = Locked<(label: String, seconds: Double)>(("", -10))

    init(total: Double) {
        self.total = total
    }

    func show(_ progress: Soak.Progress) {
        let label = progress.label.padding(toLength: 8, withPad: " ", startingAt: 0)
        let text =
            "\(label) \(String(format: "%5.1f/%.0f", progress.seconds, total)) s  usage \(ByteSize.describe(progress.usageBytes)) "
            + "of \(ByteSize.describe(progress.memoryMaxBytes))  level \(progress.level.rawValue)"
            + (progress.releases.map { "  releases \($0)" } ?? "") + (progress.trend.map { "  trend \($0)" } ?? "")
        let due = lastPrinted.withLock { last in
            let due = isTerminal || last.label != progress.label || progress.seconds - last.seconds >= 5
            if due { last = (progress.label, progress.seconds) }
            return due
        }
        guard due else { return }
        if isTerminal {
            FileHandle.standardError.write(Data(("\r\u{1B}[2K" + text).utf8))
        } else {
            Output.errorLine(text)
        }
    }

    func finish() {
        if isTerminal { FileHandle.standardError.write(Data("\n".utf8)) }
    }
}

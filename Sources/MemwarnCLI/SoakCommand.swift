import ArgumentParser
import Foundation
import Logging
import Memwarn
import MemwarnSystem
import MemwarnSoak

/// `memwarn soak`: the demo service with and without memwarn, under the same limit.
struct SoakCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "soak",
        abstract: "Run the demo service under a memory limit with memwarn and without; compare.",
        discussion: """
            Runs memwarn-demo (built beside memwarn) twice, each in a new cgroup with the same \
            limit (as memwarn run does): first with memwarn — warnings release caches and media, \
            critical pressure closes idle connections and terminates suspended sessions — then \
            without it (the baseline). A progress line shows elapsed time, usage against the \
            limit and the level. The report, side by side: survived or killed, OOM kills, \
            warnings, bytes released per tier, units terminated, peak usage, lost writes. \
            Exit status: 0 when the memwarn run survived with 0 OOM kills and 0 lost writes; \
            1 when it did not, or a run could not start (no permission to create cgroups, \
            say), or the plot could not be written; 64 for bad arguments or no memwarn-demo.
            Examples:
              memwarn soak
              memwarn soak --memory-max 256M --duration 60s --plot soak.svg
              memwarn soak --duration 30s --json > soak.json
            """)

    @Option(name: .long, help: ArgumentHelp("The limit for each run.", valueName: "size"))
    var memoryMax = "256M"

    @Option(name: .long, help: ArgumentHelp("How long the demo's load runs (then it verifies its writes): 60s, 90, 2m.", valueName: "time"))
    var duration = "60s"

    @Flag(name: .long, help: "Print the report as JSON (the progress line still goes to stderr).")
    var json = false

    @Option(name: .long, help: ArgumentHelp("Write an SVG plot of usage against the limit over time for both runs.", valueName: "file.svg"))
    var plot: String?

    @Flag(name: .long, help: "Skip the run without memwarn.")
    var noBaseline = false

    func validate() throws {
        guard let maximum = ByteSize.parse(memoryMax, allowingZero: true) else { throw ValidationError("--memory-max: \"\(memoryMax)\" is not a size (examples: 256M, 1G)") }
        guard maximum >= ByteSize.smallestLimit else { throw ValidationError("--memory-max: \(memoryMax) is below the smallest limit, 1M") }
        guard let seconds = Self.parseSeconds(duration) else {
            throw ValidationError("--duration: \"\(duration)\" is not a duration (examples: 60s, 90, 2m)")
        }
        guard Self.durationRange.contains(seconds) else {
            throw ValidationError("--duration: \(duration) is out of range: a soak runs from 1s to 24h (86400s)")
        }
    }

    /// The soak's shortest and longest load, in seconds: under a second the demo cannot start and
    /// verify; past a day the run is a mistake (and `1e16` would overflow the clock).
    static let durationRange: ClosedRange<Double> = 1...86_400

    /// `60s`, `90`, `2m`, `1.5m` in seconds, when in ``durationRange``.
    static func seconds(_ text: String) -> Double? {
        parseSeconds(text).flatMap { durationRange.contains($0) ? $0 : nil }
    }

    /// `60s`, `90`, `2m`, `1.5m` in seconds (any finite, non-negative number).
    private static func parseSeconds(_ text: String) -> Double? {
        let scale: Double = text.hasSuffix("m") ? 60 : 1
        let number = Double(text.hasSuffix("m") || text.hasSuffix("s") ? String(text.dropLast()) : text)
        guard let number, number.isFinite, number >= 0 else { return nil }
        return number * scale
    }

    func run() async throws {
        let demo = try Self.demoPath()
        let environment = ProcessInfo.processInfo.environment
        var logger = Logger(label: "memwarn")
        logger.logLevel = .error
        let soak = Soak(demoPath: demo, memoryMaxBytes: ByteSize.parse(memoryMax) ?? 0,
                        duration: .milliseconds(Int64((Self.seconds(duration) ?? 60) * 1_000)), includesBaseline: !noBaseline,
                        policy: try PressurePolicy.load(environment: environment))
        let line = ProgressLine(limit: soak.memoryMaxBytes, total: Self.seconds(duration) ?? 60)
        let report = try await soak.run(logger: logger) { line.show($0) }
        line.finish()
        if let plot {
            do {
                try SoakPlot.svg(report).write(toFile: plot, atomically: true, encoding: .utf8)
                Output.errorLine("memwarn soak: plot written to \(plot)")
            } catch {
                Output.errorLine("Error: cannot write the plot to \(plot): \(error)")
                throw ExitCode(1)
            }
        }
        Output.line(json ? try report.json() : report.text)
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
    private let limit: UInt64
    private let total: Double
    private let isTerminal = isatty(2) == 1
    private let lastPrinted = Locked<(label: String, seconds: Double)>(("", -10))

    init(limit: UInt64, total: Double) {
        self.limit = limit
        self.total = total
    }

    func show(_ progress: Soak.Progress) {
        let label = progress.label.padding(toLength: 8, withPad: " ", startingAt: 0)
        let text = "\(label) \(String(format: "%5.1f/%.0f", progress.seconds, total)) s  usage \(ByteSize.describe(progress.usageBytes)) "
            + "of \(ByteSize.describe(limit))  level \(progress.level.rawValue)"
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

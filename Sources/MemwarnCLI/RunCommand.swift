import ArgumentParser
import CgroupKit
import Dispatch
import Foundation
import Logging
import MemwarnMonitor
import MemwarnSoak
import MemwarnSystem
import UnixSignals

/// `memwarn run`: a command under a new memory-limited cgroup, watched.
struct RunCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Run a command in a new cgroup with a memory limit; report how it went.",
        discussion: """
            The cgroup is a uniquely named child of memwarn's own memory cgroup (cgroup v1 \
            through libcgroup; v2 where the memory controller is on cgroup2), made before the \
            command starts; the command joins it before exec. Level changes go to stderr as they \
            happen. At the end memwarn prints the exit status or signal, OOM kills, peak usage and \
            warnings, removes the cgroup (also on Ctrl-C or SIGTERM, which are passed to the \
            command; a second one kills it), and exits with the command's status (128 + signal \
            if it was killed). --json prints the report as one JSON line on stdout, after \
            whatever the command printed there. Needs permission to create cgroups: root, or \
            a cgroup delegated to your user (systemd-run --user --scope -p Delegate=yes).
            Exit status:
              N      the command's own exit status
              128+N  the command was killed by signal N (137: SIGKILL, as an OOM kill)
              64     bad arguments; nothing was started
              125    memwarn failed before the command started: no permission to
                     create the cgroup, no memory controller, a --config or --report
                     file it cannot use, out of file descriptors or processes to
                     start the command with
              126    the command could not join the cgroup before exec
              127    the command was not found, is not executable, or its exec failed
              1      the command exited 0 but the --report file could not be written
            Examples:
              memwarn run --memory-max 256M -- ./my-service --port 8080
              memwarn run --memory-max 64M --json -- /bin/true > run.json
              memwarn run --memory-max 64M --report run.json -- \\
                  .build/debug/memwarn-hog --allocate 100M    # OOM-killed: exit 137
            (memwarn-hog is memwarn's test hog: swift build --product memwarn-hog.)
            """)

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("The hard limit: bytes or with a unit (64M, 1.5G).", valueName: "size"))
    var memoryMax: String

    @Option(
        name: .long, parsing: .unconditional,
        help: ArgumentHelp(
            "The throttling limit, cgroup v2 only: a size, or max for none (default on v2: halfway between the critical mark and --memory-max, 95% on the default policy).",
            valueName: "size|max"))
    var memoryHigh: String?

    @Option(name: .long, help: ArgumentHelp("Also write the report as JSON to this file.", valueName: "file"))
    var report: String?

    @Flag(name: .long, help: "Print the report as one JSON line on stdout at the end (after the command's own output).")
    var json = false

    @Option(name: .long, help: ArgumentHelp("A policy file (format of Config/memwarn.conf).", valueName: "file"))
    var config: String?

    @Argument(parsing: .postTerminator, help: ArgumentHelp("The command and its arguments, after --.", valueName: "command"))
    var command: [String] = []

    func validate() throws {
        guard !command.isEmpty else { throw ValidationError("no command: give it after --, as in memwarn run --memory-max 64M -- CMD") }
        guard let maximum = ByteSize.parse(memoryMax, allowingZero: true) else {
            throw ValidationError("--memory-max: \(InvalidValueMessage.notASize(memoryMax)) (examples: 67108864, 64M, 1.5G)")
        }
        guard maximum >= ByteSize.smallestLimit else {
            throw ValidationError("--memory-max: \(memoryMax) is below the smallest limit, 1M: no command can start under it")
        }
        if let memoryHigh, memoryHigh != "max" {
            guard let high = ByteSize.parse(memoryHigh) else {
                throw ValidationError("--memory-high: \(InvalidValueMessage.notASize(memoryHigh)) (or max, for none)")
            }
            guard high >= ByteSize.smallestLimit else {
                throw ValidationError("--memory-high: \(memoryHigh) is below the smallest limit, 1M: no command can start under it")
            }
            guard high <= maximum else { throw ValidationError("--memory-high must not be above --memory-max") }
        }
    }

    func run() async throws {
        let environment = ProcessInfo.processInfo.environment
        let policy: PressurePolicy
        do {
            policy = try PressurePolicy.load(file: config, environment: environment)
        } catch {
            Output.errorLine("Error: \(error)")
            throw ExitCode(125)
        }
        var logger = Logger(label: "memwarn")
        logger.logLevel = .error
        let options = ConstrainedRun.Options(
            command: command, memoryMaxBytes: ByteSize.parse(memoryMax) ?? 0, memoryHigh: Self.memoryHighSetting(memoryHigh), policy: policy)
        // The report's file is made before the command starts: a path that cannot be written
        // is an error now, not after the run. Like the report itself, it is a new file renamed
        // over the name: a symbolic link there is replaced, never written through.
        if let report {
            do {
                try FileSystem.replaceFile(report, with: [], mode: 0o644)
            } catch {
                Output.errorLine("Error: cannot write the report to \(report): \(error.reason)")
                throw ExitCode(125)
            }
        }
        // Trapped before the command starts (it gets the default dispositions back before exec).
        // A hang-up or a closed output pipe ends the run as SIGTERM does: the command is told,
        // and the cgroup removed.
        let signals = await UnixSignalsSequence(trapping: .sigint, .sigterm, .sighup, .sigpipe)
        // libdispatch opens its event loop's descriptors lazily, on a thread of its own, and traps
        // when it cannot: under a tiny descriptor limit that raced with the cgroup files opened
        // below (a crash instead of "Error: … Too many open files"). A timer makes it open them now.
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(1)) { done.resume() }
        }
        let run: ConstrainedRun
        do {
            run = try ConstrainedRun(options, logger: logger)
        } catch let error as CgroupError where error.code == .permissionDenied {
            // The message names the cgroup and says how to get permission (root, or a
            // delegated cgroup); the path in front of it would only repeat the cgroup.
            Output.errorLine("Error: \(error.message)")
            throw ExitCode(125)
        } catch {
            Output.errorLine("Error: \(error)")
            // Only a command that is not there is the command's failure: memwarn's own (out of
            // descriptors starting it, say) is 125, as for anything else before it started.
            let notFound = (error as? ConstrainedRun.StartError).map { $0.code == .commandNotFound || $0.code == .noCommand } ?? false
            throw ExitCode(notFound ? 127 : 125)
        }
        let forwarding = Task {
            for await signal in signals {
                run.forward(signal: signal == .sighup || signal == .sigpipe ? SIGTERM : signal.rawValue)
            }
        }
        for leftover in run.leftoversRemoved {
            Output.errorLine("memwarn run: \(leftover)")
        }
        Output.errorLine("memwarn run: pid \(run.pid) in \(run.cgroup.location.directory), limit \(ByteSize.describe(options.memoryMaxBytes))")
        let limit = options.memoryMaxBytes
        let result = await run.wait { event in
            Output.errorLine(
                "memwarn run: \(event.level.rawValue) — \(ByteSize.describe(event.snapshot.usageBytes)) of \(ByteSize.describe(limit)) [\(event.source.name)]")
        }
        forwarding.cancel()
        for line in Self.summary(result) { Output.errorLine("memwarn run: " + line) }
        if json {
            Output.line(try JSONLine.encode(result))
        }
        if let report {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            do {
                try FileSystem.replaceFile(report, with: encoder.encode(result), mode: 0o644)
            } catch {
                Output.errorLine("Error: cannot write the report to \(report): \((error as? SystemError)?.reason ?? "\(error)")")
                throw ExitCode(result.exitCode == 0 ? 1 : result.exitCode)
            }
        }
        throw ExitCode(result.exitCode)
    }

    /// `--memory-high`: absent, automatic; `max`, none; else the size (validated).
    static func memoryHighSetting(_ text: String?) -> MemoryHighSetting {
        guard let text else { return .automatic }
        return text == "max" ? .none : ByteSize.parse(text).map { .bytes($0) } ?? .automatic
    }

    static func summary(_ result: ConstrainedRunReport) -> [String] {
        let ending = result.exit.signal.map { "killed by signal \($0)\($0 == SIGKILL ? " (SIGKILL)" : "")" } ?? "exited with status \(result.exit.status ?? 0)"
        let warnings = result.warnings.isEmpty ? "none" : result.warnings.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
        return (result.monitorError.map { ["the monitor stopped (\($0)): the command ran unmonitored from then on; its levels are missing"] } ?? []) + [
            "\(ending) after \(String(format: "%.1f", result.durationSeconds)) s (exit code \(result.exitCode))",
            "OOM kills \(result.oomKills); peak \(result.peakUsageBytes.map(ByteSize.describe) ?? "unknown") of \(ByteSize.describe(result.memoryMaxBytes)); levels entered: \(warnings)",
            result.cgroupRemoved ? "cgroup \(result.cgroup) removed" : "cgroup \(result.cgroup) could NOT be removed",
        ]
    }
}

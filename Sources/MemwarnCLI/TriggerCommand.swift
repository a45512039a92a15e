import ArgumentParser
import Foundation
import MemwarnControl
import MemwarnSystem

/// `memwarn trigger`: ask running processes to release memory now, through their control endpoints.
struct TriggerCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "trigger",
        abstract: "Ask running processes to release memory now, as a memory warning would.",
        discussion: """
            Talks to the control endpoint of each process that runs a memwarn ControlService: \
            <pid>.sock in $XDG_RUNTIME_DIR/memwarn, else /run/user/<uid>/memwarn, else for \
            root /run/memwarn, else /tmp/memwarn-<uid> (your own /tmp/memwarn-<uid>.XXXXXX \
            when another user made that first); a directory another user owns or may \
            change is refused, and so is an endpoint run by another user than you or root. \
            Stale sockets (their process gone, or nothing listening) are removed first; what \
            the endpoint sends is printed without control characters. \
            The report lists the consumers in the order they were asked: the documented tier \
            order, the largest first within a tier. --json prints each process's reply as one \
            JSON line.
            Exit status: 0 when every process asked released (even nothing); 1 when any could \
            not be asked or refused (unknown pid, no endpoint, a directory or endpoint not \
            trusted, a timeout): one line "Error: ..." after the reports of the others; 64 for \
            bad arguments.
            Examples:
              memwarn trigger --all --level critical --json
              memwarn trigger --pid 4242 --target-bytes 64M   # stop once 64 MiB are freed
            """)

    /// The levels a trigger can ask for.
    enum Level: String, ExpressibleByArgument, CaseIterable {
        case warning, critical
    }

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("The process to ask.", valueName: "pid"))
    var pid: Int32?

    @Flag(name: .long, help: "Ask every process of this user that has a control endpoint.")
    var all = false

    @Option(name: .long, help: "The level to release for: warning (caches and media) or critical (shared resources too). Default: warning.")
    var level: Level?

    @Flag(name: .customLong("terminate-suspended"), help: "Only terminate suspended units (a critical release of that tier).")
    var terminateSuspended = false

    @Option(
        name: .customLong("target-bytes"), parsing: .unconditional,
        help: ArgumentHelp(
            "Stop once this much is freed: bytes or with a unit (67108864, 64M, 1.5G). Default: everything the level allows.", valueName: "size"))
    var targetBytes: String?

    @Flag(name: .long, help: "Print each process's reply as one JSON line.")
    var json = false

    func validate() throws {
        guard (pid != nil) != all else { throw ValidationError("give either --pid PID or --all") }
        if let pid, pid <= 0 { throw ValidationError("--pid takes a positive process ID; got \(pid)") }
        if let targetBytes, Self.bytes(targetBytes) == nil {
            throw ValidationError("--target-bytes: \(InvalidValueMessage.notASize(targetBytes)) (examples: 0, 67108864, 64M, 1.5G)")
        }
        if terminateSuspended && level == .warning {
            throw ValidationError("--terminate-suspended always releases at critical; drop --level warning")
        }
    }

    /// A `--target-bytes` value in bytes: any size from 0 (more than `Int.max` is everything).
    static func bytes(_ text: String) -> Int? {
        ByteSize.parse(text, allowingZero: true).map { Int(clamping: $0) }
    }

    var request: ControlRequest {
        let target = targetBytes.flatMap(Self.bytes) ?? .max
        if terminateSuspended { return .terminateSuspended(targetBytes: target) }
        return .warn(level: level == .critical ? .critical : .warning, targetBytes: target)
    }

    func run() throws {
        let directories = ControlDirectory.searchPaths
        for directory in directories {
            // A directory another user could have made or could change is not believed.
            try ControlDirectory.check(directory)
            ControlClient.pruneStaleSockets(in: directory)
        }
        let sockets = try socketPaths(in: directories)
        var failures: [(code: ControlError.Code, text: String)] = []
        for (index, path) in sockets.enumerated() {
            let pid = ControlDirectory.pid(ofSocket: path) ?? 0
            let process = Self.naming(pid)
            do {
                let line = try ControlClient.exchange(request.line, with: path)
                switch try ControlReply(line: Array(line.utf8)) {
                case .failure(let message):
                    failures.append((.refused, "\(process): \(Output.printable(message))"))
                case .status, .coordinated:
                    failures.append((.unexpectedReply, "\(process): answered with something other than a report"))
                case .released(_, _, let report):
                    if json {
                        Output.line(Output.printable(line))
                    } else {
                        Output.line((index > 0 ? "\n" : "") + Output.printable(TriggerReport(process: process, report: report).text()))
                    }
                }
            } catch {
                failures.append((error.code, "\(process): \(error.message)"))
            }
        }
        guard let first = failures.first else { return }
        // The first failure's code: what a caller matching on it would act on first.
        let summary =
            failures.count == 1 ? first.text : "\(failures.count) of \(sockets.count) processes failed: " + failures.map(\.text).joined(separator: "; ")
        throw ControlError(first.code, summary)
    }

    /// `process 4242 (my-service)`: the pid and the program's name as the kernel keeps it
    /// (`/proc/PID/comm`, at most 15 characters, printable); the pid alone once it is gone.
    static func naming(_ pid: Int32) -> String {
        guard
            let name = try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8)
                .trimmingCharacters(in: .newlines), !name.isEmpty
        else { return "process \(pid)" }
        return "process \(pid) (\(Output.printable(name)))"
    }

    /// The sockets to ask: the one of `--pid`, or all of them.
    private func socketPaths(in directories: [String]) throws -> [String] {
        let named = directories.joined(separator: ", ")
        guard let pid else {
            let all = directories.flatMap { ControlClient.socketPaths(in: $0) }
            guard !all.isEmpty else {
                throw ControlError(.noEndpoint, "no control endpoints in \(named): no process of this user runs a memwarn ControlService")
            }
            return all
        }
        return [try ServiceEndpoint.socket(of: pid, in: directories)]
    }
}

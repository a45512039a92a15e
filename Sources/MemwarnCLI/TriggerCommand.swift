import ArgumentParser
import Foundation
import Memwarn
import MemwarnSystem


/// `memwarn trigger`: ask running processes to release memory now, through their control endpoints.
struct TriggerCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "trigger",
        abstract: "Ask running processes to release memory now, as a memory warning would.",
        discussion: """
            Talks to the control endpoint of each process that runs a memwarn ControlService: \
            <pid>.sock in $XDG_RUNTIME_DIR/memwarn, else /run/user/<uid>/memwarn, else for \
            root /run/memwarn, else /tmp/memwarn-<uid>; a directory another user owns or may \
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

    @Option(name: .long, help: ArgumentHelp("The process to ask.", valueName: "pid"))
    var pid: Int32?

    @Flag(name: .long, help: "Ask every process of this user that has a control endpoint.")
    var all = false

    @Option(name: .long, help: "The level to release for: warning (caches and media) or critical (shared resources too). Default: warning.")
    var level: Level?

    @Flag(name: .customLong("terminate-suspended"), help: "Only terminate suspended units (a critical release of that tier).")
    var terminateSuspended = false

    @Option(name: .customLong("target-bytes"), help: ArgumentHelp(
        "Stop once this much is freed: bytes or with a unit (67108864, 64M, 1.5G). Default: everything the level allows.", valueName: "size"))
    var targetBytes: String?

    @Flag(name: .long, help: "Print each process's reply as one JSON line.")
    var json = false

    func validate() throws {
        guard (pid != nil) != all else { throw ValidationError("give either --pid PID or --all") }
        if let pid, pid <= 0 { throw ValidationError("--pid takes a positive process ID; got \(pid)") }
        if let targetBytes, Self.bytes(targetBytes) == nil {
            throw ValidationError("--target-bytes: \"\(targetBytes)\" is not a size (examples: 0, 67108864, 64M, 1.5G)")
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
        let directory = ControlDirectory.defaultPath
        // A directory another user could have made or could change is not believed.
        try ControlDirectory.check(directory)
        ControlClient.pruneStaleSockets(in: directory)
        let sockets = try socketPaths(in: directory)
        var failures: [String] = []
        for (index, path) in sockets.enumerated() {
            let pid = ControlDirectory.pid(ofSocket: path) ?? 0
            do {
                let line = try ControlClient.exchange(request.line, with: path)
                switch try ControlReply(line: Array(line.utf8)) {
                case .failure(let message):
                    failures.append("process \(pid): \(Output.printable(message))")
                case .status, .coordinated:
                    failures.append("process \(pid): answered with something other than a report")
                case .released(_, _, let report):
                    if json {
                        Output.line(Output.printable(line))
                    } else {
                        Output.line((index > 0 ? "\n" : "") + Output.printable(TriggerReport(pid: pid, report: report).text()))
                    }
                }
            } catch {
                failures.append("process \(pid): \(error.message)")
            }
        }
        guard failures.isEmpty else {
            let summary = failures.count == 1 ? failures[0] : "\(failures.count) of \(sockets.count) processes failed: " + failures.joined(separator: "; ")
            throw ControlError(summary)
        }
    }

    /// The sockets to ask: the one of `--pid`, or all of them.
    private func socketPaths(in directory: String) throws -> [String] {
        guard let pid else {
            let all = ControlClient.socketPaths(in: directory)
            guard !all.isEmpty else { throw ControlError("no control endpoints in \(directory): no process of this user runs a memwarn ControlService") }
            return all
        }
        guard ControlClient.processExists(pid) else { throw ControlError("no process with pid \(pid)") }
        let path = ControlDirectory.socketPath(for: pid, in: directory)
        guard FileManager.default.fileExists(atPath: path) else {
            throw ControlError("process \(pid) has no control endpoint in \(directory) (it runs no memwarn ControlService, has MEMWARN_CONTROL=off, or belongs to another user)")
        }
        return [path]
    }
}

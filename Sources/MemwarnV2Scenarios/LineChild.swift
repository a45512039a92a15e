import Foundation
import Memwarn

/// A child process the runner talks to by lines: commands to its standard input, its standard
/// output read line by line with a time limit on every read (a hung child fails its scenario,
/// not the whole run). Its standard error is kept for the details of a failure.
///
/// With a cgroup, the child joins it before its program starts: `/bin/sh` writes its own pid
/// to `cgroup.procs`, then `exec`s the program, so every page the program touches is charged
/// to the cgroup.
final class LineChild: Sendable {
    /// The child's pid.
    let pid: Int32
    /// The program, for messages.
    let program: String
    private let process: Process
    private let input: FileHandle
    private let output = LineBuffer()
    private let errors = LineBuffer()
    private let exitCode = Locked<Int32?>(nil)

    /// Starts `arguments` (the program's absolute path first).
    ///
    /// - Parameters:
    ///   - cgroup: the cgroup to start it in, or `nil` for the runner's own (the root).
    ///   - environment: added to the runner's environment.
    init(_ arguments: [String], in cgroup: ScenarioCgroup? = nil, environment: [String: String] = [:]) throws {
        let process = Process()
        if let cgroup {
            process.executableURL = URL(fileURLWithPath: "/bin/sh")
            process.arguments = ["-c", "echo $$ > \"$0\" || exit 126; exec \"$@\"", cgroup.location.file("cgroup.procs")] + arguments
        } else {
            process.executableURL = URL(fileURLWithPath: arguments[0])
            process.arguments = Array(arguments.dropFirst())
        }
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        let inputPipe = Pipe()
        let outputPipe = Pipe()
        let errorPipe = Pipe()
        process.standardInput = inputPipe
        process.standardOutput = outputPipe
        process.standardError = errorPipe
        let exitCode = self.exitCode
        process.terminationHandler = { finished in
            let code = finished.terminationReason == .uncaughtSignal ? 128 + finished.terminationStatus : finished.terminationStatus
            exitCode.withLock { $0 = code }
        }
        try process.run()
        self.process = process
        pid = process.processIdentifier
        program = arguments[0]
        input = inputPipe.fileHandleForWriting
        output.read(from: outputPipe.fileHandleForReading)
        errors.read(from: errorPipe.fileHandleForReading)
    }

    /// Sends one line to its standard input.
    func send(_ line: String) throws {
        try input.write(contentsOf: Data((line + "\n").utf8))
    }

    /// Closes its standard input (the probes and the hog exit then).
    func closeInput() {
        try? input.close()
    }

    /// The next line of its standard output.
    ///
    /// - Throws: ``ScenarioFailure`` when none came within `limit`, or the child closed its
    ///   output (exited or was killed) first.
    func nextLine(within limit: Duration = .seconds(60)) async throws -> String {
        let deadline = ContinuousClock.now + limit
        while true {
            switch output.takeLine() {
            case .line(let line): return line
            case .ended: throw ScenarioFailure("\(program) ended its output (exit \(exitDescription)); stderr: \(errors.lastLines(5))")
            case .none:
                guard ContinuousClock.now < deadline else {
                    throw ScenarioFailure("no line from \(program) within \(limit); stderr: \(errors.lastLines(5))")
                }
                try await Task.sleep(for: .milliseconds(10))
            }
        }
    }

    /// Every line it printed to standard output that was not read yet, once it closed it.
    func remainingLines(within limit: Duration = .seconds(60)) async throws -> [String] {
        var lines: [String] = []
        while true {
            do {
                lines.append(try await nextLine(within: limit))
            } catch where output.hasEnded {
                return lines
            }
        }
    }

    /// Its standard error so far (the end of it).
    var standardErrorTail: String { errors.lastLines(5) }

    /// Sends a signal.
    func signal(_ number: Int32) {
        kill(pid, number)
    }

    /// Waits for it to end: its exit status, or 128 + the signal that killed it.
    ///
    /// - Throws: ``ScenarioFailure`` when it is still running after `limit` (it is killed then).
    func exitStatus(within limit: Duration = .seconds(60)) async throws -> Int32 {
        let deadline = ContinuousClock.now + limit
        while ContinuousClock.now < deadline {
            if let code = exitCode.withLock({ $0 }) { return code }
            try await Task.sleep(for: .milliseconds(10))
        }
        kill(pid, SIGKILL)
        throw ScenarioFailure("\(program) still ran after \(limit); killed it")
    }

    /// Kills it when it still runs (cleanup after a failed assertion).
    func killIfRunning() {
        if exitCode.withLock({ $0 }) == nil { kill(pid, SIGKILL) }
    }

    private var exitDescription: String {
        exitCode.withLock { $0 }.map(String.init) ?? "not yet"
    }
}

import MemwarnTestKit

/// A command run to its end: its exit status, standard output lines and standard error.
struct CommandRun {
    /// The exit status, or 128 + the signal.
    let status: Int32
    /// Its standard output, a line each.
    let lines: [String]
    /// The end of its standard error.
    let errorTail: String

    /// Runs `arguments` (the program's absolute path first) in the runner's cgroup, or in `cgroup`.
    ///
    /// - Parameter environment: added to the runner's environment.
    static func run(
        _ arguments: [String], environment: [String: String] = [:], in cgroup: TestCgroup? = nil,
        within limit: Duration = .seconds(120)
    ) async throws -> CommandRun {
        let finished = try await ChildProcess.runOffThePool(
            arguments, environment: ScenarioContext.environment(adding: environment), in: cgroup,
            timeout: limit)
        let errors = finished.standardError.split(separator: "\n").suffix(5).joined(separator: " | ")
        return CommandRun(status: finished.status, lines: finished.standardOutput.split(separator: "\n").map(String.init), errorTail: errors)
    }
}

/// A command run to its end: its exit status, standard output lines and standard error.
struct CommandRun {
    /// The exit status, or 128 + the signal.
    let status: Int32
    /// Its standard output, a line each.
    let lines: [String]
    /// The end of its standard error.
    let errorTail: String

    /// Runs `arguments` (the program's absolute path first) in the runner's cgroup.
    static func run(_ arguments: [String], environment: [String: String] = [:], within limit: Duration = .seconds(120)) async throws -> CommandRun {
        let child = try LineChild(arguments, environment: environment)
        child.closeInput()
        let lines = try await child.remainingLines(within: limit)
        let status = try await child.exitStatus(within: limit)
        return CommandRun(status: status, lines: lines, errorTail: child.standardErrorTail)
    }
}

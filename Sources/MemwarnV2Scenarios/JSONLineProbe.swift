/// A child that takes one command a line and answers with one JSON object a line
/// (`memwarn-lifecycle-probe`), on top of ``LineChild``.
final class JSONLineProbe: Sendable {
    /// The process.
    let child: LineChild

    /// Starts `arguments` inside `cgroup`.
    init(_ arguments: [String], in cgroup: ScenarioCgroup) throws {
        child = try LineChild(arguments, in: cgroup)
    }

    /// Sends a command and reads the next reply.
    ///
    /// - Throws: ``ScenarioFailure`` for a reply with an `error` member, or none in time.
    @discardableResult
    func send(_ command: String, within limit: Duration = .seconds(120)) async throws -> [String: Any] {
        try child.send(command)
        return try await receive(within: limit)
    }

    /// Sends a command and reads the next reply that `skipping` does not match (the probe's
    /// monitor may print a release report at any time).
    func send(_ command: String, skipping: ([String: Any]) -> Bool, within limit: Duration = .seconds(120)) async throws -> [String: Any] {
        try child.send(command)
        return try await receive(until: { !skipping($0) }, within: limit)
    }

    /// Reads the next reply.
    func receive(within limit: Duration = .seconds(120)) async throws -> [String: Any] {
        let object = try JSONObject.parse(try await child.nextLine(within: limit))
        if let error = object["error"] { throw ScenarioFailure("\(child.program) failed: \(error)") }
        return object
    }

    /// Reads replies until one satisfies `matches`.
    func receive(until matches: ([String: Any]) -> Bool, within limit: Duration = .seconds(120)) async throws -> [String: Any] {
        while true {
            let reply = try await receive(within: limit)
            if matches(reply) { return reply }
        }
    }
}

import Foundation

/// A child process that takes one command a line on stdin and answers with one JSON object a
/// line on stdout (the test probes: `memwarn-release-probe`, `memwarn-lifecycle-probe`), on top
/// of ``LineChild``.
public final class JSONLineChild: Sendable {
    /// A reply whose `error` member is set, or a line that is not a JSON object.
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    /// The process.
    public let child: LineChild
    /// The child's pid.
    public var pid: Int32 { child.pid }

    /// Spawns `arguments`, in `cgroup` when one is given (it joins between `fork` and `exec`).
    ///
    /// - Parameter environment: the child's environment as `NAME=value` entries; `nil` passes this process's.
    public init(_ arguments: [String], in cgroup: TestCgroup? = nil, environment: [String]? = nil) throws {
        child = try LineChild(arguments, in: cgroup, environment: environment)
    }

    /// Sends a command and reads the next reply.
    @discardableResult
    public func send(_ command: String, timeout: Duration = .seconds(60)) throws -> [String: Any] {
        try send(command, skipping: { _ in false }, timeout: timeout)
    }

    /// Sends a command and reads replies until one that `skip` does not match: for a child
    /// that also prints lines of its own at any time (a probe's release reports).
    @discardableResult
    public func send(_ command: String, skipping skip: ([String: Any]) -> Bool, timeout: Duration = .seconds(60)) throws -> [String: Any] {
        try child.send(command)
        return try receive(until: { !skip($0) }, timeout: timeout).match
    }

    /// Sends a command and awaits the next reply that `skip` does not match.
    @discardableResult
    public func send(_ command: String, skipping skip: ([String: Any]) -> Bool = { _ in false }, within limit: Duration) async throws -> [String: Any] {
        try child.send(command)
        while true {
            let reply = try await receive(within: limit)
            if !skip(reply) { return reply }
        }
    }

    /// Reads the next reply (for lines the child prints on its own).
    ///
    /// - Throws: ``Failure`` for an `error` reply or a line that is not a JSON object;
    ///   ``ChildProcessError`` when the child exited or said nothing within `timeout`.
    public func receive(timeout: Duration = .seconds(60)) throws -> [String: Any] {
        try Self.reply(try child.nextLine(timeout: timeout))
    }

    /// Awaits the next reply.
    ///
    /// - Throws: as ``receive(timeout:)``.
    public func receive(within limit: Duration) async throws -> [String: Any] {
        try Self.reply(try await child.nextLine(within: limit))
    }

    /// Awaits replies until one satisfies `matches` (at most `limit` for each).
    public func receive(until matches: ([String: Any]) -> Bool, within limit: Duration) async throws -> [String: Any] {
        while true {
            let reply = try await receive(within: limit)
            if matches(reply) { return reply }
        }
    }

    /// Reads replies until one satisfies `matches`; returns it and the ones read before it.
    public func receive(until matches: ([String: Any]) -> Bool, timeout: Duration = .seconds(60)) throws -> (match: [String: Any], before: [[String: Any]]) {
        var before: [[String: Any]] = []
        while true {
            let reply = try receive(timeout: timeout)
            if matches(reply) { return (reply, before) }
            before.append(reply)
        }
    }

    private static func reply(_ line: String) throws -> [String: Any] {
        guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else {
            throw Failure(description: "the child printed a line that is not a JSON object: \(line)")
        }
        if let error = object["error"] { throw Failure(description: "the child failed: \(error)") }
        return object
    }

    /// Closes its stdin (the probes then exit), waits for it, and returns its exit status
    /// (128 + signal when killed; it is killed after a minute). A second call returns the same.
    @discardableResult
    public func stop() -> Int32 {
        child.closeInput()
        return (try? child.waitForExit(timeout: .seconds(60))) ?? child.exitIfEnded?.code ?? -1
    }

    deinit { stop() }
}

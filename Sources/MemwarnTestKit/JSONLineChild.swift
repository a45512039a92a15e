import CgroupKit
import Foundation

/// A child process that takes one command a line on stdin and answers with one JSON object a
/// line on stdout (the test probes: `memwarn-release-probe`, `memwarn-lifecycle-probe`).
public final class JSONLineChild {
    /// A reply whose `error` member is set.
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    public let pid: Int32
    private let input: Int32
    private let output: Int32
    private var stopped = false

    /// Spawns `arguments` and, when a cgroup is given, moves the child into it.
    ///
    /// - Parameter environment: the child's environment as `NAME=value` entries; `nil` passes this process's.
    public init(_ arguments: [String], in cgroup: TestCgroup? = nil, environment: [String]? = nil) throws {
        (pid, input, output) = try ChildProcess.spawn(arguments, environment: environment)
        do {
            try cgroup?.add(pid: pid)
        } catch {
            kill(pid, SIGKILL)
            _ = ChildProcess.wait(pid)
            throw error
        }
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
        let bytes = Array((command + "\n").utf8)
        _ = bytes.withUnsafeBytes { write(input, $0.baseAddress, $0.count) }
        return try receive(until: { !skip($0) }, timeout: timeout).match
    }

    /// Reads the next reply (for lines the child prints on its own).
    ///
    /// - Throws: ``Failure`` for an `error` reply or a line that is not a JSON object;
    ///   ``CgroupError`` when the child exited or said nothing within `timeout`.
    public func receive(timeout: Duration = .seconds(60)) throws -> [String: Any] {
        let line = try ChildProcess.readLine(output, timeout: timeout)
        guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else {
            throw Failure(description: "the child printed a line that is not a JSON object: \(line)")
        }
        if let error = object["error"] { throw Failure(description: "the child failed: \(error)") }
        return object
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

    /// Closes its stdin (the probes then exit), waits for it, and returns its exit status
    /// (128 + signal when killed). A second call returns -1.
    @discardableResult
    public func stop() -> Int32 {
        guard !stopped else { return -1 }
        stopped = true
        close(input)
        let status = ChildProcess.wait(pid)
        close(output)
        return status
    }

    deinit { stop() }
}

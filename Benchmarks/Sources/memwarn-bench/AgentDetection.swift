import Foundation
import MemwarnTestKit
#if canImport(Glibc)
import Glibc
#endif

/// Part of `memwarn-bench agent`: how soon the agent reports a crossing of its parent's warning
/// mark, with a clean search path and with one under attack, side by side in the same run.
///
/// A `memwarn-hog` in a child cgroup of a 256 MiB test parent steps the parent's usage to 86 % of
/// its limit (`crossings` times), then back to under 30 %; each time the latency is from the
/// hog's acknowledgement (its last page touched: the crossing happened during the step, so this
/// is an upper bound of the delay after the parent's usage stopped moving) to the agent's
/// `crossing` line, 0 when the line came first. Under attack the control directory holds 100
/// junk sockets (50 whose listener's backlog is full, 50 that accept and never answer, the last
/// held by this process, outside the parent) and four hostile endpoints under the parent
/// (`memwarn-hog --endpoint`: one that hangs on every release, one that lies about its size, one
/// whose release report overflows a sum, one that never answers anything), which the agent finds,
/// leases and asks in its rounds (the mute one fails every search, retried every 5 s).
struct AgentDetection {
    var crossings = 40
    static let limitMiB = 256

    struct Result {
        var attacked: Bool
        var latenciesMilliseconds: [Double] = []
        var failure: String?
        /// The agent's exit status after SIGTERM (0: it lived through every round).
        var agentStatus: Int32?
        var unreachable = 0
        var unanswered = 0
    }

    func run(memwarn: String, attacked: Bool, progress: @Sendable (String) -> Void) async -> Result {
        var result = Result(attacked: attacked)
        do {
            try await withTestCgroup(limit: UInt64(Self.limitMiB) << 20) { parent in
                var template = Array((NSTemporaryDirectory() + "/memwarn-detect-XXXXXX").utf8CString)
                guard let made = mkdtemp(&template) else { throw BenchmarkError("no control directory: errno \(errno)") }
                let directory = String(cString: made)
                defer { try? FileManager.default.removeItem(atPath: directory) }
                var junk: JunkSockets?
                var hostile: [MemoryHog] = []
                var children: [TestCgroup] = []
                defer {
                    for hog in hostile { hog.terminate() }
                    for child in children.reversed() { try? child.remove() }
                    _ = junk
                }
                if attacked {
                    junk = try JunkSockets(in: directory, full: 50, silent: 50)
                    for mode in ["hang", "lie", "overflow", "mute"] {
                        let child = try parent.child(mode)
                        children.append(child)
                        let hog = try MemoryHog(in: child, arguments: ["--endpoint", directory, mode])
                        hostile.append(hog)
                        _ = try await hog.hold(4 << 20, within: .seconds(10))
                    }
                }
                let agent = try LineChild([memwarn, "agent", "--cgroup", parent.location.path, "--control-dir", directory, "--json"])
                defer { agent.killIfRunning() }
                var records: [[String: Any]] = []
                func until(_ event: String, within limit: Duration) async throws {
                    let deadline = ContinuousClock.now + limit
                    while true {
                        let line = try await agent.nextLine(within: max(.milliseconds(10), deadline - .now))
                        guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else { continue }
                        records.append(object)
                        if object["event"] as? String == event { return }
                    }
                }
                try await until("started", within: .seconds(30))
                let grower = try parent.child("grower")
                children.append(grower)
                let hog = try MemoryHog(in: grower)
                hostile.append(hog)
                let limit = Double(Self.limitMiB << 20)
                for index in 0..<crossings {
                    let others = try parent.usage() - (try grower.usage())
                    _ = try await hog.hold(max(0, Int(0.86 * limit) - Int(others)), within: .seconds(30))
                    let stepped = ContinuousClock.now
                    try await until("crossing", within: .seconds(10))  // already in the pipe when it came first
                    result.latenciesMilliseconds.append(max(0, (ContinuousClock.now - stepped).inMilliseconds))
                    _ = try await hog.hold(0, within: .seconds(30))
                    try await until("relieved", within: .seconds(30))
                    if (index + 1) % 10 == 0 { progress("agent detection (\(attacked ? "attacked" : "clean")): \(index + 1)/\(crossings) crossings") }
                }
                agent.signal(SIGTERM)
                result.agentStatus = try await agent.exitStatus(within: .seconds(10))
                records += ((try? await agent.remainingLines(within: .seconds(5))) ?? []).compactMap {
                    try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
                }
                result.unreachable = records.filter { $0["event"] as? String == "unreachable" }.count
                result.unanswered = records.filter { $0["event"] as? String == "unanswered" }.count
            }
        } catch {
            result.failure = "\(error)".split(separator: "\n").first.map(String.init) ?? "\(error)"
        }
        return result
    }
}

extension AgentDetection.Result {
    private func percentile(_ percent: Double) -> Double? {
        guard !latenciesMilliseconds.isEmpty else { return nil }
        let sorted = latenciesMilliseconds.sorted()
        return sorted[min(sorted.count - 1, Int((Double(sorted.count - 1) * percent / 100).rounded(.up)))]
    }

    var row: [String] {
        [
            attacked ? "100 junk sockets + hang, lie, overflow, mute endpoints" : "clean search path", String(latenciesMilliseconds.count),
            percentile(50).map { fixed($0, 2) } ?? "-", percentile(99).map { fixed($0, 2) } ?? "-",
            latenciesMilliseconds.max().map { fixed($0, 2) } ?? "-", String(unreachable), String(unanswered),
            agentStatus.map(String.init) ?? "-", failure ?? "",
        ]
    }

    static let header = ["search path", "crossings", "p50 ms", "p99 ms", "max ms", "unreachable said", "unanswered", "agent exit", "failure"]

    var json: JSON {
        .object([
            ("attacked", .raw(attacked ? "true" : "false")), ("latencies_ms", .array(latenciesMilliseconds.map { .double($0, digits: 3) })),
            ("p50_ms", percentile(50).map { .double($0, digits: 3) } ?? .raw("null")),
            ("p99_ms", percentile(99).map { .double($0, digits: 3) } ?? .raw("null")),
            ("agent_exit", agentStatus.map { .number(Int($0)) } ?? .raw("null")), ("failure", failure.map { .string($0) } ?? .raw("null")),
        ])
    }
}

extension Duration {
    fileprivate var inMilliseconds: Double { Double(components.seconds) * 1000 + Double(components.attoseconds) / 1e15 }
}

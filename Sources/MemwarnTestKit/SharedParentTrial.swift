import CgroupKit
import Foundation
import MemwarnSystem

#if canImport(Glibc)
import Glibc
#endif

/// Memwarn services sharing a parent cgroup's limit, each in a child cgroup of its own with no
/// limit: `memwarn-growth-probe`s with control endpoints, growing at their own rates, optionally
/// beside a sibling that does not link memwarn (a `memwarn-hog`) and the node agent. For the
/// tests, the benchmark and the cgroup v2 VM: one trial, one outcome.
public struct SharedParentTrial {
    /// Who handles the parent's pressure.
    public enum Coordination: String, Sendable, CaseIterable {
        /// `memwarn agent --cgroup <parent>`: the services lease it the parent's limit.
        case agent
        /// Each service's own monitor sees the parent's limit (the default policy) and releases on its own.
        case alone
        /// Each service's own monitor sees only its own limit (`ancestor_limits = ignore`):
        /// nothing answers the parent's pressure; the kernel does.
        case ownLimitOnly = "own-limit-only"
    }

    /// One service: its child cgroup's name, insert rate and total (MiB/s, MiB).
    public struct Service: Sendable {
        public var name: String
        public var rateMiB: Double
        public var totalMiB: Double
        public init(name: String, rateMiB: Double, totalMiB: Double) {
            self.name = name
            self.rateMiB = rateMiB
            self.totalMiB = totalMiB
        }
    }

    /// How one service ended.
    public struct ServiceOutcome: @unchecked Sendable {
        // @unchecked: JSON objects from JSONSerialization, read-only once made.
        public var name: String
        public var pid: Int32
        /// Its exit status (137: killed by SIGKILL, the OOM killer's signal).
        public var status: Int32
        /// Its JSON lines (`armed`, `level`, `release`, `done`, ...).
        public var events: [[String: Any]]
        public var standardError: String
        public func all(_ name: String) -> [[String: Any]] { events.filter { $0["event"] as? String == name } }
        /// Whether it inserted its whole total and ended by itself.
        public var survived: Bool { status == 0 && !all("done").isEmpty }
        /// Bytes its releases freed, as it reported them.
        public var releasedBytes: Int { all("release").reduce(0) { $0 + ($1["freed"] as? Int ?? 0) } }
    }

    public struct Outcome: @unchecked Sendable {
        // @unchecked: JSON objects from JSONSerialization, read-only once made.
        public var services: [ServiceOutcome]
        /// The agent's JSON lines (empty without an agent).
        public var agentRecords: [[String: Any]]
        public var agentStandardError: String
        /// The parent's episodes of pressure, as read from outside every service every 2 ms:
        /// crossing the warning mark (80 %) to back under the recovery mark (70 %).
        public var episodes: [ParentUsageRecorder.Episode]
        /// The highest parent usage those readings saw.
        public var parentPeakBytes: UInt64
        public func agent(_ event: String) -> [[String: Any]] { agentRecords.filter { $0["event"] as? String == event } }
        /// Every service's released bytes, added.
        public var releasedBytes: Int { services.reduce(0) { $0 + $1.releasedBytes } }
    }

    public let parent: TestCgroup
    public let services: [Service]
    /// A sibling that does not link memwarn: its child cgroup's name and the MiB it holds,
    /// taken in steps while the services grow.
    public var sibling: (name: String, holdMiB: Int)?
    /// Misbehaving endpoints (`memwarn-hog --endpoint DIR hang|lie`), each in a child cgroup of
    /// its own, holding `holdMiB`: started before the services.
    public var endpoints: [(name: String, mode: String, holdMiB: Int)] = []
    /// More arguments for `memwarn agent` (`--lease 60s`, say).
    public var agentArguments: [String] = []
    /// Kill the agent (SIGKILL) as soon as it reports its first crossing: mid-release.
    public var killsAgentAtFirstCrossing = false
    /// The `memwarn` and `memwarn-growth-probe` executables: beside the running one by default
    /// (the tests'), or where a benchmark's build put them.
    public var memwarnPath = ChildProcess.productsDirectory + "/memwarn"
    public var probePath = ChildProcess.productsDirectory + "/memwarn-growth-probe"
    /// Busy loops started beside the services (outside the parent), one per count, for the
    /// trial's length: the agent and the services then compete for the CPU, as on a busy node.
    public var cpuHogs = 0
    /// Seconds the probes wait before inserting (the agent finds them first), and stay up after.
    public var startAfterSeconds = 1.0
    public var holdSeconds = 2.0

    public init(parent: TestCgroup, services: [Service]) {
        self.parent = parent
        self.services = services
    }

    /// Runs the trial: the agent first (when asked for), then the services and the sibling;
    /// waits for every service to end (within `bound`), stops the agent (SIGTERM) and removes the
    /// child cgroups (the parent is the caller's). Every process started is killed by pid on the
    /// way out, whatever happened.
    ///
    /// - Throws: ``ChildProcessError`` when a process cannot be started or does not end in time,
    ///   CgroupKit's `CgroupError` when a cgroup cannot be made.
    public func run(_ coordination: Coordination, bound: Duration = .seconds(120)) async throws -> Outcome {
        let directory = try Self.controlDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var children: [TestCgroup] = []
        var started: [LineChild] = []
        defer {
            for child in started { child.killIfRunning() }
            for child in children.reversed() { try? child.remove() }
        }
        for _ in 0..<cpuHogs {
            started.append(try LineChild(["/bin/sh", "-c", "while :; do :; done"]))
        }
        var agent: LineChild?
        if coordination == .agent {
            let launched = try LineChild(
                [
                    memwarnPath, "agent", "--cgroup", parent.location.path,
                    "--control-dir", directory, "--json",
                ] + agentArguments)
            started.append(launched)
            agent = launched
            _ = try await launched.nextLine(within: .seconds(30))  // "started": it reads the parent
        }
        var misbehaving: [MemoryHog] = []
        defer { for hog in misbehaving { hog.terminate() } }
        for endpoint in endpoints {
            let child = try parent.child(endpoint.name)
            children.append(child)
            let hog = try MemoryHog(in: child, arguments: ["--endpoint", directory, endpoint.mode])
            misbehaving.append(hog)
            _ = try await hog.hold(endpoint.holdMiB << 20, within: .seconds(10))
        }
        var environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("MEMWARN_") }
        if coordination == .ownLimitOnly { environment["MEMWARN_ANCESTOR_LIMITS"] = "ignore" }
        let entries = environment.map { "\($0.key)=\($0.value)" }
        var probes: [(Service, LineChild)] = []
        for service in services {
            let child = try parent.child(service.name)
            children.append(child)
            let probe = try LineChild(
                [
                    probePath, "--rate", "\(service.rateMiB)",
                    "--total", "\(service.totalMiB)", "--control", directory,
                    "--start-after", "\(startAfterSeconds)", "--hold", "\(holdSeconds)",
                ],
                in: child, environment: entries)
            started.append(probe)
            probes.append((service, probe))
        }
        let recorder = try ParentUsageRecorder(parent.location, limit: parent.limit)
        var recorded: (episodes: [ParentUsageRecorder.Episode], peakBytes: UInt64)?
        defer { if recorded == nil { _ = recorder.stop() } }
        var siblingHog: MemoryHog?
        defer { siblingHog?.terminate() }
        if let sibling {
            let child = try parent.child(sibling.name)
            children.append(child)
            let hog = try MemoryHog(in: child)
            siblingHog = hog
            try await Task.sleep(for: .seconds(startAfterSeconds))
            for step in 1...10 {
                _ = try await hog.hold((sibling.holdMiB << 20) * step / 10, within: .seconds(10))
                try await Task.sleep(for: .milliseconds(150))
            }
        }
        var records: [[String: Any]] = []
        let deadline = ContinuousClock.now + bound
        if killsAgentAtFirstCrossing, let agent {
            while records.last?["event"] as? String != "crossing" {
                records += Self.objects([try await agent.nextLine(within: max(.seconds(1), deadline - .now))])
            }
            agent.signal(SIGKILL)
        }
        var outcomes: [ServiceOutcome] = []
        for (service, probe) in probes {
            let status = try await probe.exitStatus(within: max(.seconds(1), deadline - .now))
            let lines = (try? await probe.remainingLines(within: .seconds(5))) ?? []
            outcomes.append(
                ServiceOutcome(
                    name: service.name, pid: probe.pid, status: status, events: Self.objects(lines),
                    standardError: probe.standardErrorText))
        }
        recorded = recorder.stop()
        var agentErrors = ""
        if let agent {
            agent.signal(SIGTERM)
            _ = try await agent.exitStatus(within: .seconds(10))
            records += Self.objects(((try? await agent.remainingLines(within: .seconds(5))) ?? []))
            agentErrors = agent.standardErrorText
        }
        return Outcome(
            services: outcomes, agentRecords: records, agentStandardError: agentErrors, episodes: recorded?.episodes ?? [],
            parentPeakBytes: recorded?.peakBytes ?? 0)
    }

    static func objects(_ lines: [String]) -> [[String: Any]] {
        lines.compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
    }

    /// A fresh private control directory (mode 0700) under the temporary directory.
    static func controlDirectory() throws -> String {
        var template = Array((NSTemporaryDirectory() + "/memwarn-trial-XXXXXX").utf8CString)
        guard let made = mkdtemp(&template) else { throw ChildProcessError("a control directory could not be made: errno \(errno)") }
        return String(cString: made)
    }
}

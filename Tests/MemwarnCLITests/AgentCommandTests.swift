import CgroupKit
import Foundation
import MemwarnTestKit
import MemwarnTestTraits
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `memwarn agent` as an operator runs it: its arguments, its errors, the node's floor
/// (`--min-available`, read from the real `/proc/meminfo`), and its metrics file.
@Suite(.serialized)
struct AgentCommandTests {
    static let memwarn = ChildProcess.productsDirectory + "/memwarn"

    @Test(arguments: [
        ([], "give --cgroup PATH, --min-available SIZE, or both"),
        (["--cgroup", "system.slice"], "--cgroup takes an absolute path"),
        (["--min-available", "lots"], "--min-available: \"lots\" is not a size"),
        (["--min-available", "500M", "--lease", "0.5s"], "--lease takes a duration within 1s...60s"),
        (["--min-available", "500M", "--ask-timeout", "2"], "--ask-timeout takes a duration"),
        (["--min-available", "500M", "--control-dir", "/etc/hostname"], "--control-dir /etc/hostname is not a directory"),
    ])
    func badArgumentsExit64WithOneLine(arguments: [String], message: String) throws {
        let result = try ChildProcess.run([Self.memwarn, "agent"] + arguments)
        #expect(result.status == 64, "\(arguments): \(result.standardError)")
        #expect(result.standardError.contains(message), "\(result.standardError)")
    }

    @Test(.tags(.root, .cgroupV1), .needsRealCgroups)
    func aParentWithoutALimitAndNoFloorIsAClearError() throws {
        // Made beside the test cgroups, below this process's own (which has no limit, nor has
        // any cgroup above it here): nothing to guard.
        let own = try #require(try CgroupDiscovery().layout().memory)
        let unlimited = try TestCgroup(at: own.child("memwarn-agent-unlimited-\(getpid())"))
        defer { try? unlimited.remove() }
        try #require(try CgroupMemoryReader(location: unlimited.location).constraints().isEmpty, "a limit applies above this cgroup here")
        let result = try ChildProcess.run([Self.memwarn, "agent", "--cgroup", unlimited.location.path])
        #expect(result.status == 1)
        #expect(result.standardError.contains("no memory limit of its own and no --min-available"), "\(result.standardError)")
        let missing = try ChildProcess.run([Self.memwarn, "agent", "--cgroup", unlimited.location.path + "/no-such-cgroup"])
        #expect(missing.status == 1 && missing.standardError.contains("no-such-cgroup"), "\(missing.standardError)")
    }

    @Test func aMetricsFileThatCannotBeWrittenIsAnErrorAtStart() throws {
        let result = try ChildProcess.run([Self.memwarn, "agent", "--min-available", "100M", "--metrics-file", "/nonexistent-memwarn-dir/agent.prom"])
        #expect(result.status == 1)
        #expect(
            result.standardError.contains("--metrics-file cannot be written") && result.standardError.contains("/nonexistent-memwarn-dir"),
            "\(result.standardError)")
    }

    @Test func theNodesFloorAsksEveryServiceOnTheNodeAndTheMetricsFileSaysSo() async throws {
        // A floor just under what is available now: the node is at its "limit" at once, so the
        // agent asks the one service in its control directory, and keeps a Prometheus file.
        // The agent asks only a service that can give the smallest release worth asking for, 1 %
        // of the node's measure (what the node uses, with the floor 16 MiB under what is
        // available): the probe holds 3 % of what the machine uses, at least 40 MiB, whatever
        // else runs on it (a build beside the tests once left 40 MiB under that 1 %).
        let directory = try Self.privateDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let holdMiB = max(40, (try Self.meminfo().usedBytes * 3 / 100) >> 20)
        let probe = try LineChild([
            ChildProcess.productsDirectory + "/memwarn-growth-probe", "--rate", "\(holdMiB)", "--total", "\(holdMiB)",
            "--control", directory, "--hold", "30",
        ])
        defer { probe.killIfRunning() }
        // Its cache holds all of it once it says done (its control endpoint listens before).
        while !(try await probe.nextLine(within: .seconds(30))).contains(#""event":"done""#) {}
        let available = try Self.meminfo().availableBytes
        let metricsFile = directory + "/agent.prom"
        let agent = try LineChild([
            Self.memwarn, "agent", "--min-available", "\(available - (16 << 20))", "--control-dir", directory,
            "--json", "--metrics-file", metricsFile,
        ])
        defer { agent.killIfRunning() }
        var records: [[String: Any]] = []
        while !records.contains(where: { $0["event"] as? String == "ask" }) {
            let line = try await agent.nextLine(within: .seconds(30))
            if let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] { records.append(object) }
        }
        let started = try #require(records.first { $0["event"] as? String == "started" })
        #expect((started["measure"] as? String)?.hasPrefix("node (MemAvailable floor") == true, "\(started)")
        let ask = try #require(records.first { $0["event"] as? String == "ask" })
        #expect(ask["pid"] as? Int == Int(probe.pid) && ask["rank"] as? Int == 1, "\(ask)")
        agent.signal(SIGTERM)
        #expect(try await agent.exitStatus(within: .seconds(10)) == 0)
        let metrics = try String(contentsOfFile: metricsFile, encoding: .utf8)
        #expect(metrics.contains("# TYPE memwarn_agent_asks_total counter"), "\(metrics)")
        #expect(metrics.contains(#"memwarn_agent_asks_total{cgroup=""#), "\(metrics)")
        #expect(metrics.contains("memwarn_agent_services 1.0"), "\(metrics)")
        // Every family explains itself, in the file and in the article.
        let lines = metrics.split(separator: "\n")
        let families = lines.filter { $0.hasPrefix("# TYPE ") }.map { String($0.split(separator: " ")[2]) }
        let helped = Set(lines.filter { $0.hasPrefix("# HELP ") }.map { String($0.split(separator: " ")[2]) })
        #expect(families.count >= 5, "\(metrics)")
        #expect(families.filter { !helped.contains($0) }.isEmpty, "families without # HELP: \(metrics)")
        let article = try String(contentsOfFile: ArticleRows.metricsArticle, encoding: .utf8)
        #expect(families.filter { !article.contains("| `\($0)` |") }.isEmpty, "families with no row in MetricsReference.md: \(families)")
    }

    /// `--ask-timeout` read "(default 2s). (default: 2s)": the parser adds the
    /// declared default itself. No option of any command says its default twice.
    @Test(arguments: ["status", "watch", "run", "trigger", "soak", "agent"])
    func noOptionsHelpSaysItsDefaultTwice(command: String) throws {
        let result = try ChildProcess.run([Self.memwarn, command, "--help"])
        #expect(result.status == 0, "\(result.standardError)")
        let options = result.standardOutput.components(separatedBy: "\n  -").dropFirst()
        #expect(options.count > 1, "\(result.standardOutput)")
        for option in options where option.contains("(default: ") {
            let mentions = option.lowercased().components(separatedBy: "default").count - 1
            #expect(mentions == 1, "memwarn \(command): -\(option)")
        }
    }

    /// The agent's `time` is ISO 8601, as `watch` writes it; it was epoch seconds.
    @Test func everyJSONLineOfTheAgentCarriesAnISO8601Time() async throws {
        let directory = try Self.privateDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let agent = try LineChild([Self.memwarn, "agent", "--min-available", "1M", "--control-dir", directory, "--json"])
        defer { agent.killIfRunning() }
        var lines = [try await agent.nextLine(within: .seconds(30))]
        agent.signal(SIGTERM)
        #expect(try await agent.exitStatus(within: .seconds(10)) == 0)
        lines += try await agent.remainingLines(within: .seconds(10))
        let records = try lines.map { try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any], "\($0)") }
        #expect(records.first?["event"] as? String == "started" && records.last?["event"] as? String == "stopped", "\(lines)")
        for record in records {
            let time = record["time"] as? String
            #expect(time.flatMap { ISO8601DateFormatter.fractional.date(from: $0) } != nil, "\(record)")
        }
    }

    /// `FILE.tmp` was opened following links, so whoever may write the
    /// textfile directory could point it at a file of root's and have the agent truncate it.
    @Test func aLinkPlantedAtTheMetricsFilesTemporaryNameIsNotWrittenThrough() async throws {
        let directory = try Self.privateDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let victim = directory + "/victim"
        let victimText = "root's file, not the agent's\n"
        try Data(victimText.utf8).write(to: URL(fileURLWithPath: victim))
        let metricsFile = directory + "/agent.prom"
        for planted in [metricsFile + ".tmp", metricsFile] {
            try FileManager.default.createSymbolicLink(atPath: planted, withDestinationPath: victim)
        }
        let agent = try LineChild([Self.memwarn, "agent", "--min-available", "1M", "--control-dir", directory, "--json", "--metrics-file", metricsFile])
        defer { agent.killIfRunning() }
        let started = try await agent.nextLine(within: .seconds(30))
        #expect(started.contains(#""event":"started""#), "\(started)")
        agent.signal(SIGTERM)
        #expect(try await agent.exitStatus(within: .seconds(10)) == 0)
        #expect(try String(contentsOfFile: victim, encoding: .utf8) == victimText, "the victim is untouched")
        var status = stat()
        #expect(lstat(metricsFile, &status) == 0 && status.st_mode & S_IFMT == S_IFREG, "the link at the file's own name was replaced, not followed")
        #expect(try String(contentsOfFile: metricsFile, encoding: .utf8) != victimText)
        let left = try FileManager.default.contentsOfDirectory(atPath: directory).sorted()
        #expect(left == ["agent.prom", "agent.prom.tmp", "victim"], "no temporary file left behind: \(left)")
    }

    static func meminfo() throws -> SystemMemory {
        try SystemMemory.parse(String(contentsOfFile: "/proc/meminfo", encoding: .utf8), path: "/proc/meminfo")
    }

    static func privateDirectory() throws -> String {
        var template = Array((NSTemporaryDirectory() + "/memwarn-agent-XXXXXX").utf8CString)
        return String(cString: try #require(mkdtemp(&template)))
    }
}

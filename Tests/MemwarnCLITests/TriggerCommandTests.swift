import CgroupKit
import Foundation
import MemwarnSystem
import MemwarnTestKit
import MemwarnTestTraits
import Testing

/// `memwarn trigger`, run as an operator would, against a real service-like process
/// (`memwarn-release-probe`, its monitor and so its control endpoint running) in a real
/// cgroup: caches of 60, 40 and 20 MiB, media of 7 MiB and four idle 2 MiB connections.
@Suite(.serialized, .tags(.root, .cgroupV1), .needsRealCgroups)
struct TriggerCommandTests {
    static let memwarn = ChildProcess.productsDirectory + "/memwarn"
    static let probe = ChildProcess.productsDirectory + "/memwarn-release-probe"
    /// Roomy: the probe's 135 MiB stays below the warning mark, so its monitor releases nothing on its own.
    static let limit: UInt64 = 512 << 20
    static let mebibyte = 1 << 20

    /// A fresh runtime directory (`XDG_RUNTIME_DIR`) for the probes and the CLI, removed afterwards.
    struct Runtime {
        let directory: String
        let environment: [String]

        init() {
            var template = Array((NSTemporaryDirectory() + "memwarn-trigger-XXXXXX").utf8CString)
            let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
            directory = String(cString: made!)
            environment =
                ProcessInfo.processInfo.environment.filter { $0.key != "XDG_RUNTIME_DIR" && $0.key != "MEMWARN_CONTROL" }
                .map { "\($0.key)=\($0.value)" } + ["XDG_RUNTIME_DIR=\(directory)"]
        }

        func socket(of pid: Int32) -> String { directory + "/memwarn/\(pid).sock" }

        func trigger(_ arguments: [String]) throws -> ChildProcess.Finished {
            try ChildProcess.run([TriggerCommandTests.memwarn, "trigger"] + arguments, environment: environment)
        }

        /// A loaded release probe whose monitor (and so its endpoint) runs.
        func servingProbe(in cgroup: TestCgroup, load: Bool = true) throws -> JSONLineChild {
            let probe = try JSONLineChild([TriggerCommandTests.probe], in: cgroup, environment: environment)
            if load { _ = try probe.send("load") }
            #expect(try probe.send("watch")["watching"] as? String == "normal")
            #expect(access(socket(of: probe.pid), F_OK) == 0, "the probe's endpoint is up")
            return probe
        }

        func remove() { try? FileManager.default.removeItem(atPath: directory) }
    }

    static func withServingProbe(_ body: (JSONLineChild, Runtime) throws -> Void) async throws {
        let runtime = Runtime()
        defer { runtime.remove() }
        try await withTestCgroup(limit: Self.limit) { cgroup in
            let probe = try runtime.servingProbe(in: cgroup)
            defer { probe.stop() }
            try body(probe, runtime)
        }
    }

    static func object(_ line: some StringProtocol) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
    }

    static func entries(_ report: [String: Any]) throws -> [(consumer: String, tier: String, freed: Int)] {
        try #require(report["entries"] as? [[String: Any]]).map {
            ($0["consumer"] as? String ?? "", $0["tier"] as? String ?? "", $0["bytesFreed"] as? Int ?? -1)
        }
    }

    @Test func jsonReportReleasesCachesLargestFirstThenMediaAndIsTheProcesssOwn() async throws {
        try await Self.withServingProbe { probe, runtime in
            let result = try runtime.trigger(["--pid", "\(probe.pid)", "--json"])
            #expect(result.status == 0, "\(result.standardError)")
            let lines = result.standardOutput.split(separator: "\n")
            #expect(lines.count == 1)
            let reply = try Self.object(try #require(lines.first))
            #expect(reply["ok"] as? Bool == true && reply["request"] as? String == "warn")
            #expect(reply["pid"] as? Int == Int(probe.pid))
            let report = try #require(reply["report"] as? [String: Any])
            #expect(report["level"] as? String == "warning")
            let entries = try Self.entries(report)
            #expect(entries.map(\.consumer) == ["sessions", "thumbnails", "fragments", "media"])
            #expect(entries.map(\.tier) == ["caches", "caches", "caches", "media"])
            #expect(entries.map(\.freed) == [60, 40, 20, 7].map { $0 * Self.mebibyte })
            #expect(report["freedBytes"] as? Int == 127 * Self.mebibyte)
            // The probe prints every report its coordinator makes: the same release.
            let own = try probe.receive()
            #expect(try Self.entries(own).map(\.consumer) == entries.map(\.consumer))
            #expect(own["freedBytes"] as? Int == report["freedBytes"] as? Int)
        }
    }

    @Test func theTableListsConsumerTierBytesAndMillisecondsAndStopsAtTheTarget() async throws {
        try await Self.withServingProbe { probe, runtime in
            let result = try runtime.trigger(["--pid", "\(probe.pid)", "--target-bytes", "\(70 * Self.mebibyte)"])
            #expect(result.status == 0, "\(result.standardError)")
            let lines = result.standardOutput.split(separator: "\n").map(String.init)
            #expect(lines.count == 4, "\(result.standardOutput)")
            // Each process is named by pid and program (its name as the kernel keeps it: 15 characters).
            #expect(
                lines.first?.hasPrefix("process \(probe.pid) (memwarn-release): warning release, target 70.0 MiB: freed 70.0 MiB in ") == true,
                "\(lines)")
            #expect(lines.first?.hasSuffix(" ms (heap trimmed)") == true)
            #expect(lines.dropFirst().first?.split(separator: " ") == ["consumer", "tier", "before", "after", "freed", "ms"])
            let rows = lines.dropFirst(2).map { $0.split(separator: " ").map(String.init) }
            #expect(rows.map { $0.first } == ["sessions", "thumbnails"], "largest first; fragments not needed for 70 MiB")
            #expect(rows.first.map { Array($0[1...7]) } == ["caches", "60.0", "MiB", "0.0", "MiB", "60.0", "MiB"])
            #expect(rows.last.map { Array($0[1...7]) } == ["caches", "40.0", "MiB", "30.0", "MiB", "10.0", "MiB"], "only what was still wanted")
            #expect(rows.allSatisfy { $0.count == 9 && Double($0[8]) != nil })
        }
    }

    @Test func criticalAlsoClosesIdleConnectionsAndTerminateSuspendedAsksOnlySuspendedUnits() async throws {
        try await Self.withServingProbe { probe, runtime in
            let suspended = try runtime.trigger(["--pid", "\(probe.pid)", "--terminate-suspended", "--json"])
            #expect(suspended.status == 0, "\(suspended.standardError)")
            let nothing = try Self.object(suspended.standardOutput.trimmingCharacters(in: .newlines))
            #expect(nothing["request"] as? String == "terminate-suspended")
            let report = try #require(nothing["report"] as? [String: Any])
            #expect(report["level"] as? String == "critical")
            #expect(try Self.entries(report).isEmpty, "the probe has no suspended units; its caches are not asked")
            _ = try probe.receive()

            let critical = try runtime.trigger(["--pid", "\(probe.pid)", "--level", "critical", "--json"])
            #expect(critical.status == 0, "\(critical.standardError)")
            let entries = try Self.entries(try #require(try Self.object(critical.standardOutput.trimmingCharacters(in: .newlines))["report"] as? [String: Any]))
            #expect(entries.map(\.consumer) == ["sessions", "thumbnails", "fragments", "media", "connections"])
            #expect(entries.last?.tier == "shared-resources" && entries.last?.freed == 8 * Self.mebibyte)
        }
    }

    @Test func allAsksEveryLiveEndpointAndPrunesStaleSockets() async throws {
        let runtime = Runtime()
        defer { runtime.remove() }
        try await withTestCgroup(limit: Self.limit) { cgroup in
            let loaded = try runtime.servingProbe(in: cgroup)
            let empty = try runtime.servingProbe(in: cgroup, load: false)
            defer {
                loaded.stop()
                empty.stop()
            }
            let exited = try Self.exitedPid()
            try Self.leaveSocketFile(at: runtime.socket(of: exited))
            let result = try runtime.trigger(["--all", "--json"])
            #expect(result.status == 0, "\(result.standardError)")
            let replies = try result.standardOutput.split(separator: "\n").map { try Self.object($0) }
            #expect(replies.map { $0["pid"] as? Int } == [loaded.pid, empty.pid].sorted().map { Int($0) })
            let freed = replies.map { ($0["report"] as? [String: Any])?["freedBytes"] as? Int }
            #expect(Set(freed) == [127 * Self.mebibyte, 0])
            #expect(access(runtime.socket(of: exited), F_OK) != 0, "the exited process's socket is pruned")
        }
    }

    @Test func anUnknownPidAPidWithoutEndpointAndNoEndpointsGiveAOneLineError() throws {
        let runtime = Runtime()
        defer { runtime.remove() }
        let exited = try Self.exitedPid()
        let cases: [(arguments: [String], error: String)] = [
            (["--pid", "\(exited)"], "Error: no process with pid \(exited)"),
            (["--pid", "\(getpid())"], "Error: process \(getpid()) has no control endpoint in \(runtime.directory)/memwarn"),
            (["--all"], "Error: no control endpoints in \(runtime.directory)/memwarn"),
        ]
        for (arguments, error) in cases {
            let result = try runtime.trigger(arguments)
            #expect(result.status != 0, "\(arguments)")
            #expect(result.standardError.hasPrefix(error), "\(arguments): \(result.standardError)")
            #expect(result.standardError.split(separator: "\n").count == 1, "one line: \(result.standardError)")
            #expect(result.standardOutput.isEmpty)
        }
    }

    @Test func badArgumentsGiveAnErrorAndAFailingStatus() throws {
        let runtime = Runtime()
        defer { runtime.remove() }
        let cases = [
            [], ["--pid", "1", "--all"], ["--pid", "x"], ["--pid", "0"], ["--all", "--level", "normal"], ["--all", "--target-bytes", "-5"],
            ["--all", "--terminate-suspended", "--level", "warning"], ["--all", "--bogus"],
        ]
        for arguments in cases {
            let result = try runtime.trigger(arguments)
            #expect(result.status != 0, "\(arguments)")
            #expect(result.standardError.hasPrefix("Error: "), "\(arguments): \(result.standardError)")
            #expect(result.standardOutput.isEmpty)
        }
    }

    /// The pid of a process that has exited and been reaped.
    static func exitedPid() throws -> Int32 {
        let exited = try LineChild(["/bin/true"])
        _ = try exited.waitForExit()
        let pid = exited.pid
        return pid
    }

    /// Binds a socket at `path` and closes it: the file a process that died leaves behind.
    static func leaveSocketFile(at path: String) throws {
        try FileDescriptor.unixStreamSocket(nonBlocking: false).bind(to: UnixSocketAddress(path: path))
    }
}

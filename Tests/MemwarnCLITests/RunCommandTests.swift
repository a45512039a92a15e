import CgroupKit
import Foundation
import MemwarnTestKit
import MemwarnTestTraits
import Testing

/// `memwarn run`, run as an operator would: a command under a new limited cgroup, its exit
/// status passed through, the cgroup always removed.
@Suite(.serialized, .tags(.root, .cgroupV1), .needsRealCgroups)
struct RunCommandTests {
    static let memwarn = ChildProcess.productsDirectory + "/memwarn"
    static let hog = ChildProcess.productsDirectory + "/memwarn-hog"

    /// This process's memory cgroup directory, where `memwarn run` makes its cgroups.
    static func ownCgroupDirectory() throws -> String {
        try #require(try CgroupDiscovery().layout().memory).directory
    }

    /// The `memwarn run` cgroups a given `memwarn run` process made that still exist.
    static func runCgroups(of pid: Int32) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: try ownCgroupDirectory()).filter { $0.hasPrefix("memwarn-run-\(pid)-") }
    }

    static func temporaryFile(_ name: String) -> String {
        NSTemporaryDirectory() + "memwarn-run-test-\(getpid())-\(name)"
    }

    @Test func aCommandThatOutgrowsTheLimitIsOOMKilledAndRunExits137WithOneOOMKillReported() throws {
        let reportFile = Self.temporaryFile("oom.json")
        defer { try? FileManager.default.removeItem(atPath: reportFile) }
        let result = try ChildProcess.run([Self.memwarn, "run", "--memory-max", "64M", "--report", reportFile, "--", Self.hog, "--allocate", "\(100 << 20)"])
        #expect(result.status == 137, "\(result.standardError)")
        #expect(result.standardError.contains("OOM kills 1"))
        let report = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: reportFile))) as? [String: Any])
        #expect(report["exitCode"] as? Int == 137)
        #expect((report["exit"] as? [String: Any])?["signal"] as? Int == 9)
        #expect(report["oomKills"] as? Int == 1)
        #expect(report["memoryMaxBytes"] as? Int == 64 << 20)
        #expect((report["peakUsageBytes"] as? Int ?? 0) >= 60 << 20)
        #expect(report["cgroupRemoved"] as? Bool == true)
        let cgroup = try #require(report["cgroup"] as? String)
        #expect(!FileManager.default.fileExists(atPath: try Self.ownCgroupDirectory() + "/" + (cgroup.split(separator: "/").last.map(String.init) ?? "")))
        // Which levels the outside monitor saw before the kill depends on timing; what it saw
        // starts at normal and names only levels.
        let changes = try #require(report["levelChanges"] as? [[String: Any]]).compactMap { $0["level"] as? String }
        #expect(changes.first == "normal")
        #expect(Set(changes).isSubset(of: ["normal", "warning", "critical"]))
    }

    @Test func theCommandsExitStatusIsPassedThroughAndItsOutputIsItsOwn() throws {
        let result = try ChildProcess.run([Self.memwarn, "run", "--memory-max", "32M", "--", "/bin/sh", "-c", "echo inside; exit 3"])
        #expect(result.status == 3)
        #expect(result.standardOutput == "inside\n")
        #expect(result.standardError.contains("exited with status 3"))
    }

    /// `memwarn run --memory-max 64M -- memwarn-hog`, once the hog holds 8 MiB. The hog shares
    /// memwarn run's stdin and stdout: its reply proves it runs in the cgroup.
    static func startRunWithHog() throws -> LineChild {
        let run = try LineChild([memwarn, "run", "--memory-max", "64M", "--", hog])
        try run.send("hold \(8 << 20)")
        #expect(try run.nextLine().hasPrefix("held "))
        return run
    }

    @Test(arguments: [SIGTERM, SIGINT])
    func interruptingRunPassesTheSignalOnAndStillRemovesTheCgroup(signal: Int32) throws {
        let run = try Self.startRunWithHog()
        let pid = run.pid
        #expect(try Self.runCgroups(of: pid).count == 1)
        run.signal(signal)
        let status = try run.waitForExit()
        #expect(status == 128 + signal, "the command died of the forwarded signal; run exits as it did")
        #expect(try Self.runCgroups(of: pid).isEmpty, "the cgroup is gone")
    }

    @Test func badArgumentsGiveAOneLineErrorAndLeaveNoCgroup() throws {
        let cases: [([String], Int32?)] = [
            (["run", "--memory-max", "64M"], nil),  // no command
            (["run", "--memory-max", "lots", "--", "/bin/true"], nil),  // not a size
            (["run", "--", "/bin/true"], nil),  // no limit
            (["run", "--memory-max", "64M", "--", "/nonexistent/command"], 127),  // not found
            (["run", "--memory-max", "64M", "--", "/tmp"], 127),  // a directory (it used to say nothing)
            (["run", "--memory-max", "64M", "--memory-high", "128M", "--", "/bin/true"], nil),
            (["run", "--memory-max", "64M", "--memory-high", "32M", "--", "/bin/true"], 125),  // v1 has no memory.high
        ]
        for (arguments, expected) in cases {
            let result = try ChildProcess.run([Self.memwarn] + arguments)
            if let expected { #expect(result.status == expected, "\(arguments)") } else { #expect(result.status >= 1, "\(arguments)") }
            let firstLine = result.standardError.split(separator: "\n").first.map(String.init) ?? ""
            #expect(firstLine.hasPrefix("Error: "), "\(arguments): \(result.standardError)")
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: try Self.ownCgroupDirectory()).filter { $0.hasPrefix("memwarn-run-") }.isEmpty)
    }
}

import CgroupKit
import Foundation
import MemwarnMonitor
import MemwarnSystem
import MemwarnTestKit
import MemwarnTestTraits
import Testing

@testable import MemwarnRelease

#if canImport(Glibc)
import Glibc
#endif

/// systemd's `MemoryPressureWatch=` contract, as a service sees it: systemd starts the service
/// with `MEMORY_PRESSURE_WATCH` (and, for a PSI file, `MEMORY_PRESSURE_WRITE`) in its
/// environment. The service here is `memwarn-release-probe`, whose monitor is made as the
/// README shows (`MonitorConfiguration(...)` without an environment): the variables must reach
/// it from the process environment. Set as systemd sets them: a FIFO, a PSI file.
@Suite(.serialized, .tags(.root, .cgroupV1, .cgroupV2), .needsRealCgroups, .needsUnifiedCgroups)
struct SystemdContractTests {
    static let limit: UInt64 = 192 << 20
    /// The FIFO test loads the probe's stores first (about 149 MiB here): at 192 MiB that was
    /// 77 % of the limit, 5 MiB under the warning mark, and a busier run crossed it before the
    /// write the test is about. At 224 MiB it stands at 66 %, under the recovery mark.
    static let loadedLimit: UInt64 = 224 << 20

    /// This process's environment without the variables under test, plus `variables`.
    static func environment(_ variables: [String: String]) -> [String] {
        let names: Set<String> = ["MEMORY_PRESSURE_WATCH", "MEMORY_PRESSURE_WRITE", "MEMWARN_CONTROL"]
        return ProcessInfo.processInfo.environment.filter { !names.contains($0.key) }.merging(variables) { $1 }
            .map { "\($0.key)=\($0.value)" }
    }

    static func probe(_ variables: [String: String], in cgroup: TestCgroup) throws -> JSONLineChild {
        try JSONLineChild([ChildProcess.productsDirectory + "/memwarn-release-probe"], in: cgroup, environment: environment(variables))
    }

    @Test func aFIFOInTheEnvironmentIsWatchedAndAWriteToItIsAWarningThatReleases() async throws {
        let directory = try PrivateDirectory.makeTemporary(prefix: "memwarn-systemd-test")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let fifo = directory + "/pressure.fifo"
        #expect(mkfifo(fifo, 0o600) == 0)
        try await withTestCgroup(limit: Self.loadedLimit) { cgroup in
            let probe = try Self.probe(["MEMORY_PRESSURE_WATCH": fifo], in: cgroup)
            defer { probe.stop() }
            _ = try probe.send("load")
            let watching = try probe.send("watch")
            #expect(watching["watching"] as? String == "normal")
            #expect(
                (watching["sources"] as? [String])?.contains("systemd \(fifo)") == true,
                "the monitor made without an environment reads MEMORY_PRESSURE_WATCH: \(watching)")
            // systemd (or anything the unit trusts) signals pressure by writing to the FIFO.
            try FileDescriptor.open(fifo, O_WRONLY | O_NONBLOCK).writeWhole([1])
            let report = try probe.receive()
            #expect(report["level"] as? String == "warning", "the write is a warning, and the coordinator released: \(report)")
            #expect(report["entries"] as? [[String: Any]] != nil)
        }
    }

    @Test func aPSIFileGetsTheDecodedTriggerAndDevNullTurnsTheWatchOff() async throws {
        try await withUnifiedTestCgroup { unified in
            let pressure = unified.location.file("memory.pressure")
            // "some 150000 2000000", base64, as systemd passes MemoryPressureThresholdSec=150ms.
            let trigger = Data("some 150000 2000000".utf8).base64EncodedString()
            try await withTestCgroup(limit: Self.limit) { cgroup in
                let probe = try Self.probe(["MEMORY_PRESSURE_WATCH": pressure, "MEMORY_PRESSURE_WRITE": trigger], in: cgroup)
                defer { probe.stop() }
                let watching = try probe.send("watch")
                #expect((watching["sources"] as? [String])?.contains("systemd \(pressure)") == true, "\(watching)")
            }
            try await withTestCgroup(limit: Self.limit) { cgroup in
                let probe = try Self.probe(["MEMORY_PRESSURE_WATCH": "/dev/null"], in: cgroup)
                defer { probe.stop() }
                let sources = try #require(try probe.send("watch")["sources"] as? [String])
                #expect(!sources.contains { $0.hasPrefix("systemd") }, "/dev/null turns it off: \(sources)")
            }
        }
    }

    /// A unit whose watch cannot be used (a write that is not base64, a trigger the kernel
    /// refuses, a path that is not there) leaves the service with its own monitor: it arms, and
    /// its sources say what systemd named and why it is not watched.
    @Test func aWatchThatCannotBeUsedIsSaidAndTheMonitorArmsWithoutIt() async throws {
        try await withUnifiedTestCgroup { unified in
            let pressure = unified.location.file("memory.pressure")
            let cases: [(watch: String, write: String?, reason: String)] = [
                (pressure, "not base64!", "not base64"),
                (pressure, Data("sideways 1 2".utf8).base64EncodedString(), "writing MEMORY_PRESSURE_WRITE failed"),
                ("/run/memwarn-no-such-watch-\(getpid())", nil, "does not exist"),
            ]
            for (watch, write, reason) in cases {
                try await withTestCgroup(limit: Self.limit) { cgroup in
                    var variables = ["MEMORY_PRESSURE_WATCH": watch]
                    variables["MEMORY_PRESSURE_WRITE"] = write
                    let probe = try Self.probe(variables, in: cgroup)
                    defer { probe.stop() }
                    let watching = try probe.send("watch")
                    #expect(watching["watching"] as? String == "normal", "\(variables): \(watching)")
                    let sources = try #require(watching["sources"] as? [String], "\(watching)")
                    let said = sources.first { $0.hasPrefix("systemd \(watch) not watched") }
                    #expect(said?.contains(reason) == true, "\(variables): \(sources)")
                    #expect(sources.contains { $0.hasPrefix("psi-trigger") }, "its own sources: \(sources)")
                }
            }
        }
    }
}

import CgroupKit
import Foundation
import MemwarnTestKit
import MemwarnTestTraits
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// On cgroup v1, `cgroup.event_control` is root's, and a normal user's
/// monitor did not start at all. Now it polls usage instead (the documented fallback) and still
/// releases. The release probe runs as nobody (`setpriv`) in a real 256 MiB cgroup.
@Suite(.serialized, .tags(.root, .cgroupV1), .needsRealCgroups)
struct UnprivilegedMonitorTests {
    static let limit: UInt64 = 256 << 20

    @Test func aNormalUsersMonitorPollsUsageAndStillReleases() async throws {
        try await withTestCgroup(limit: Self.limit) { cgroup in
            let environment =
                ProcessInfo.processInfo.environment.filter { $0.key != "MEMWARN_CONTROL" }.map { "\($0.key)=\($0.value)" }
                + ["MEMWARN_CONTROL=off", "TMPDIR=/tmp"]
            let probe = try JSONLineChild(
                ChildProcess.asNobody + [
                    ChildProcess.productsDirectory + "/memwarn-release-probe"
                ], in: cgroup, environment: environment)
            defer { probe.stop() }
            _ = try probe.send("load")
            #expect(try probe.send("watch")["watching"] as? String == "normal", "the monitor started without root")
            let ballast = Int(Double(Self.limit) * 0.84) - Int(try cgroup.usage())
            var lines = [try probe.send("ballast \(ballast)")]
            while !(lines.contains { $0["entries"] != nil } && lines.contains { $0["ballast"] != nil }) {
                lines.append(try probe.receive(timeout: .seconds(20)))
            }
            let report = try #require(lines.first { $0["entries"] != nil })
            #expect(report["level"] as? String == "warning")
            #expect((report["freedBytes"] as? Int ?? 0) > 0, "the polled warning released memory")
        }
    }

    /// A limit changed at run time, where usage is sampled (a normal user on cgroup v1; v2 alike): the
    /// marks followed a new limit only at the next full reading, up to a poll interval later. The
    /// limit file's write now wakes the monitor. `memwarn watch` runs as nobody in a 1 GiB cgroup
    /// whose limit is cut to 100 MiB under 85 MiB of usage. Its full reading comes once a minute
    /// (`poll_interval = 60s`): with the default second, a loaded machine could wake it for the
    /// write and the poll at once, and the poll, taken first, named itself the source.
    @Test func aNormalUsersMonitorHearsALoweredLimitAtOnce() async throws {
        let policy = FileManager.default.temporaryDirectory.appendingPathComponent("memwarn-limit-change-\(getpid()).conf").path
        try "poll_interval = 60s\n".write(toFile: policy, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: policy) }
        try await withTestCgroup(limit: 1 << 30) { cgroup in
            let watch = try JSONLineChild(
                ChildProcess.asNobody + [ChildProcess.productsDirectory + "/memwarn", "watch", "--json", "--config", policy], in: cgroup)
            defer {
                watch.child.signal(SIGTERM)  // watch runs until told to stop
                _ = watch.stop()
            }
            #expect(try watch.receive(timeout: .seconds(20))["level"] as? String == "normal")
            let hog = try MemoryHog(in: cgroup)
            defer { hog.terminate() }
            try await hog.hold(0.85, of: 100 << 20)
            try cgroup.set("memory.limit_in_bytes", to: String(100 << 20))
            let warning = try watch.receive(timeout: .seconds(20))
            #expect(warning["level"] as? String == "warning", "\(warning)")
            #expect(warning["source"] as? String == "limit-change", "the write woke the monitor, not a later poll: \(warning)")
            #expect(warning["limitBytes"] as? Int == 100 << 20)
        }
    }

    @Test func statusSaysANormalUsersMonitorWouldPoll() throws {
        let status = try ChildProcess.run(
            ChildProcess.asNobody + [
                ChildProcess.productsDirectory + "/memwarn", "status", "--json",
            ])
        #expect(status.status == 0, "\(status.standardError)")
        #expect(status.standardOutput.contains("cgroup.event_control is root's: a monitor run by this user samples usage"), "\(status.standardOutput)")
        let root = try ChildProcess.run([ChildProcess.productsDirectory + "/memwarn", "status", "--json"])
        #expect(!root.standardOutput.contains("cgroup.event_control"), "root is not told so")
    }
}

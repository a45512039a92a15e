import CgroupKit
import Foundation
import MemwarnTestKit
import MemwarnTestTraits
import Testing

/// Issue 16, finding 7: on cgroup v1, `cgroup.event_control` is root's, and a normal user's
/// monitor did not start at all. Now it polls usage instead (the documented fallback) and still
/// releases. The release probe runs as nobody (`setpriv`) in a real 256 MiB cgroup.
@Suite(.serialized, .tags(.root, .cgroupV1), .needsRealCgroups)
struct UnprivilegedMonitorTests {
    static let limit: UInt64 = 256 << 20

    @Test func aNormalUsersMonitorPollsUsageAndStillReleases() async throws {
        try await withTestCgroup(limit: Self.limit) { cgroup in
            let environment = ProcessInfo.processInfo.environment.filter { $0.key != "MEMWARN_CONTROL" }.map { "\($0.key)=\($0.value)" }
                + ["MEMWARN_CONTROL=off", "TMPDIR=/tmp"]
            let probe = try JSONLineChild(ChildProcess.asNobody + [
                                           ChildProcess.productsDirectory + "/memwarn-release-probe"], in: cgroup, environment: environment)
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

    @Test func statusSaysANormalUsersMonitorWouldPoll() throws {
        let status = try ChildProcess.run(ChildProcess.asNobody + [
                                           ChildProcess.productsDirectory + "/memwarn", "status", "--json"])
        #expect(status.status == 0, "\(status.standardError)")
        #expect(status.standardOutput.contains("cgroup.event_control is root's: a monitor run by this user samples usage"), "\(status.standardOutput)")
        let root = try ChildProcess.run([ChildProcess.productsDirectory + "/memwarn", "status", "--json"])
        #expect(!root.standardOutput.contains("cgroup.event_control"), "root is not told so")
    }
}

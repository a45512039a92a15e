import CgroupKit
import Foundation
import MemwarnMonitor
import MemwarnRelease
import MemwarnStores
import MemwarnTestKit
import MemwarnTestTraits
import Testing

@testable import MemwarnControl

/// A flood of idle connections under a small descriptor limit used to take
/// every descriptor, the monitor's next read failed with `EMFILE`, the monitor stopped for good,
/// and the service was OOM-killed. A child (`memwarn-release-probe`) under `ulimit -n 96` in a
/// real 256 MiB cgroup is flooded with 120 connections while usage climbs: the endpoint serves no
/// more than a quarter of the limit, the monitor keeps reading and releasing, and afterwards the
/// endpoint answers again.
@Suite(.serialized, .tags(.root, .cgroupV1), .needsRealCgroups)
struct DescriptorFloodTests {
    static let limit: UInt64 = 256 << 20

    @Test func aConnectionFloodUnderASmallDescriptorLimitNeitherStopsTheMonitorNorTheEndpoint() async throws {
        try await withTestCgroup(limit: Self.limit) { cgroup in
            let probePath = ChildProcess.productsDirectory + "/memwarn-release-probe"
            let probe = try JSONLineChild(["/bin/sh", "-c", "ulimit -n 96 && exec \"$0\"", probePath], in: cgroup)
            defer { probe.stop() }
            _ = try probe.send("load")
            #expect(try probe.send("watch")["watching"] as? String == "normal")
            let socket = ControlDirectory.socketPath(for: probe.pid, in: ControlDirectory.defaultPath)

            // 120 idle connections, held while usage climbs past the warning mark.
            let flood = try (0..<120).map { _ in try RawControlClient(socket) }
            let isReport: ([String: Any]) -> Bool = { $0["entries"] != nil }
            let ballast = Int(Double(Self.limit) * 0.84) - Int(try cgroup.usage())
            var lines = [try probe.send("ballast \(ballast)")]
            while !(lines.contains(where: isReport) && lines.contains { $0["ballast"] != nil }) {
                do { lines.append(try probe.receive(timeout: .seconds(20))) } catch {
                    Issue.record("during the flood: \(error); lines: \(lines)")
                    throw error
                }
            }
            let report = try #require(lines.first(where: isReport))
            #expect(report["level"] as? String == "warning", "the monitor read and released during the flood")
            let refused = flood.map { $0.readToEnd() }.filter { $0.contains("too many connections") }.count
            #expect(refused >= 120 - ControlEndpoint.connectionLimit(forDescriptorLimit: 96), "beyond a quarter of the limit, turned away")

            // Afterwards: the endpoint answers, and the monitor still releases as usage climbs again.
            guard case .status(let status) = try ControlClient.send(.status, to: socket) else {
                Issue.record("no status after the flood")
                return
            }
            #expect(status.pid == probe.pid)
            let more = Int(Double(Self.limit) * 0.93) - Int(try cgroup.usage())
            var after = [try probe.send("ballast \(more)")]
            while !(after.contains(where: isReport) && after.contains { $0["ballast"] != nil }) {
                do { after.append(try probe.receive(timeout: .seconds(20))) } catch {
                    Issue.record("after the flood: \(error); lines: \(after)")
                    throw error
                }
            }
        }
    }
}

import CgroupKit
import Foundation
import MemwarnTestKit
import MemwarnTestTraits
import Testing

/// In a cgroup named `app 2` (100 MiB) beside `app` (1 GiB), libcgroup's lookup
/// stopped at the space and was preferred over memwarn's own parse of `/proc/PID/cgroup`:
/// `status` watched `app`, and `run` made its cgroup under `app`, outside the caller's limit.
@Suite(.serialized, .tags(.root, .cgroupV1), .needsRealCgroups)
struct CgroupNameTests {
    static let memwarn = ChildProcess.productsDirectory + "/memwarn"

    @Test func aSpaceInTheCgroupNameIsReadWhole() async throws {
        try await withTestCgroup(limit: 2 << 30) { parent in
            let wide = try parent.child("app", settings: [("memory.limit_in_bytes", String(1 << 30))])
            let narrow = try parent.child("app 2", settings: [("memory.limit_in_bytes", String(100 << 20))])
            defer {
                try? narrow.remove()
                try? wide.remove()
            }
            let status = try await ChildProcess.runOffThePool([Self.memwarn, "status", "--json"], in: narrow)
            let report = try #require(try JSONSerialization.jsonObject(with: Data(status.standardOutput.utf8)) as? [String: Any], "\(status.standardError)")
            #expect(report["cgroupPath"] as? String == narrow.location.path, "\(report)")
            #expect(report["limitBytes"] as? Int == 100 << 20, "\(report)")

            let run = try await ChildProcess.runOffThePool([Self.memwarn, "run", "--memory-max", "50M", "--", "cat", "/proc/self/cgroup"], in: narrow)
            #expect(run.status == 0, "\(run.standardError)")
            let memoryLine = try #require(run.standardOutput.split(separator: "\n").first { $0.contains(":memory:") })
            #expect(memoryLine.contains(narrow.location.path + "/memwarn-run-"), "the run's cgroup is under the caller's: \(memoryLine)")
        }
    }
}

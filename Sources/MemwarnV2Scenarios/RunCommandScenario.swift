import CgroupKit
import Foundation
import MemwarnTestKit

/// `memwarn run --memory-max 64M -- memwarn-hog --allocate 100MiB` on v2: the command is
/// OOM-killed, `memwarn run` exits 137, reports exactly one OOM kill, and removes its cgroup
/// (made with mkdir + `memory.max` below the root, whose `+memory` the VM's init turned on).
enum RunCommandScenario {
    static let scenario = Scenario(name: "cli-run-oom", timeLimit: .seconds(180), body: run)

    static func run(_ context: ScenarioContext) async throws {
        let reportPath = "/tmp/v2s-run-report.json"
        let run = try await CommandRun.run([
            context.products.memwarn, "run", "--memory-max", "64M", "--report", reportPath, "--",
            context.products.hog, "--allocate", "\(100 * mebibyte)",
        ])
        try expect(run.status == 137, "memwarn run exited \(run.status), expected 137; stderr: \(run.errorTail)")
        try expect(run.errorTail.contains("OOM kills 1;"), "stderr does not report one OOM kill: \(run.errorTail)")
        let report = try JSONObject.parse(String(decoding: try Data(contentsOf: URL(fileURLWithPath: reportPath)), as: UTF8.self))
        let cgroupPath = try require(report["cgroup"] as? String, "the report has no cgroup: \(report)")
        let exit = report["exit"] as? [String: Any]
        try expect(
            report["exitCode"] as? Int == 137 && exit?["signal"] as? Int == 9 && report["oomKills"] as? Int == 1
                && report["memoryMaxBytes"] as? Int == 64 * mebibyte && report["cgroupRemoved"] as? Bool == true,
            "the report: \(report)")
        try expect(cgroupPath.hasPrefix("/memwarn-run-"), "the run's cgroup \(cgroupPath) is not below the root")
        try expect(!KernelFiles.host.exists(ScenarioContext.cgroupRoot.directory + cgroupPath), "\(cgroupPath) still exists")
        let left = try KernelFiles.host.list(ScenarioContext.cgroupRoot.directory).filter { $0.hasPrefix("memwarn-run-") }
        try expect(left.isEmpty, "cgroups left behind: \(left)")
        context.note(
            "exit 137, oomKills 1, cgroup \(cgroupPath) removed, levels entered \(report["warnings"].map { "\($0)" } ?? "?"), peak \(describe(bytes: report["peakUsageBytes"] as? Int ?? 0))"
        )
    }
}

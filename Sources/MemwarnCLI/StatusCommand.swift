import ArgumentParser
import CgroupKit
import Foundation
import Memwarn

/// `memwarn status`: one snapshot.
struct StatusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Print one snapshot: usage, effective limit, PSI and the level it means.",
        discussion: "Example: memwarn status --json --cgroup /system.slice/app.service")

    @OptionGroup var target: TargetOptions

    func run() async throws {
        let policy = try PressurePolicy.load(file: target.config, environment: ProcessInfo.processInfo.environment)
        let discovery = CgroupDiscovery()
        let layout = try target.cgroup.map { try discovery.layout(cgroupPath: $0) } ?? discovery.layout()
        let snapshot = try SnapshotSampler(layout: layout).sample()
        let level = PressureMonitor.level(of: snapshot, policy: policy)
        let report = StatusReport(layout: layout, snapshot: snapshot, level: level)
        if target.json {
            print(try report.json())
        } else {
            print(report.text(policy: policy))
        }
    }
}

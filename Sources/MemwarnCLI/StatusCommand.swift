import ArgumentParser
import CgroupKit
import Foundation
import Logging
import Memwarn
import MemwarnSoak

/// `memwarn status`: one snapshot.
struct StatusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Print one snapshot: usage, effective limit, PSI and the level it means.",
        discussion: "Example: memwarn status --json --cgroup /system.slice/app.service")

    @OptionGroup var target: TargetOptions

    @Option(name: .customLong("growth-sample"), help: ArgumentHelp(
        "How long to read usage to measure growth (11 readings over this time; 0s for none).", valueName: "DURATION"))
    var growthSample = "500ms"

    func validate() throws {
        guard let duration = PressurePolicy.parseDuration(growthSample), duration <= .seconds(60) else {
            throw ValidationError("--growth-sample must be a duration such as 500ms or 2s, at most 60s; got \"\(growthSample)\"")
        }
    }

    func run() async throws {
        let policy = try PressurePolicy.load(file: target.config, environment: ProcessInfo.processInfo.environment)
        let discovery = CgroupDiscovery()
        let layout = try target.cgroup.map { try discovery.layout(cgroupPath: $0) } ?? discovery.layout()
        // What `memwarn run`s killed before they could clean up left under this process's cgroup.
        if let own = try? discovery.layout().memory {
            var logger = Logger(label: "memwarn")
            logger.logLevel = .error
            for leftover in ConstrainedRun.removeLeftovers(in: own, logger: logger) {
                Output.errorLine("memwarn status: \(leftover)")
            }
        }
        let sampler = SnapshotSampler(layout: layout)
        let span = PressurePolicy.parseDuration(growthSample) ?? .zero
        let (snapshot, forecast) = span > .zero
            ? try await PressureForecast.measure(sampler: sampler, readings: 11, interval: span / 10, policy: policy)
            : (try sampler.sample(), nil)
        let level = PressureMonitor.level(of: snapshot, policy: policy)
        let report = StatusReport(layout: layout, snapshot: snapshot, level: level, forecast: forecast)
        if target.json {
            print(try report.json())
        } else {
            print(report.text(policy: policy))
        }
    }
}

import ArgumentParser
import Foundation
import Logging
import MemwarnMonitor
import MemwarnSystem
import ServiceLifecycle

/// `memwarn watch`: the monitor's level changes, as they happen.
struct WatchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "watch",
        abstract: "Print the current level, then one line per level change, until interrupted.",
        discussion: """
            Event-driven: the monitor sleeps until the kernel reports a crossing, a pressure or \
            OOM notification or a PSI trigger, or the growth forecast (source "forecast") sees \
            the critical mark within forecast_horizon. JSON lines carry time, level, previous, \
            usageBytes and limitBytes (of the limit that binds: the cgroup's own or a limited \
            ancestor's, the one with the least headroom), limitCgroup (the cgroup that sets it), \
            cgroupUsageBytes (the watched cgroup's own usage), ratio, source, growthBytesPerSecond, secondsToCritical and \
            secondsToLimit (null when usage is not clearly growing).
            Exit status: 0 when interrupted (Ctrl-C, SIGTERM); 1 when the cgroup does not \
            exist, a file or the policy cannot be read, or the monitor stops (its cgroup \
            removed, say); 64 for bad arguments.
            Example: memwarn watch --json --cgroup /system.slice/app.service
            """)

    @OptionGroup var target: TargetOptions

    func run() async throws {
        let environment = ProcessInfo.processInfo.environment
        let policy = try PressurePolicy.load(file: target.config, environment: environment)
        var logger = Logger(label: "memwarn")
        logger.logLevel = .critical
        let configuration = MonitorConfiguration(policy: policy, cgroupPath: target.cgroup, environment: environment)
        let monitor = PressureMonitor(configuration: configuration, logger: logger)
        let printer = Task { [json = target.json] in
            for await event in monitor.events() {
                Output.line(json ? try WatchLine(event).json() : WatchLine(event).text())
            }
        }
        let group = ServiceGroup(
            configuration: .init(
                services: [monitor], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        defer { printer.cancel() }
        try await group.run()
        _ = try await printer.value
    }
}

/// One line of `memwarn watch`.
struct WatchLine: Encodable {
    var time: String
    var level: String
    var previous: String?
    var usageBytes: UInt64
    var limitBytes: UInt64?
    /// The cgroup whose limit binds (the watched one's own, or a limited ancestor's), `null` when none applies.
    var limitCgroup: String?
    /// The watched cgroup's own usage (`usageBytes` is the binding cgroup's).
    var cgroupUsageBytes: UInt64?
    var ratio: Double
    var source: String
    var growthBytesPerSecond: Double?
    var secondsToCritical: Double?
    var secondsToLimit: Double?

    init(_ event: LevelEvent) {
        time = ISO8601Time.string(sinceEpoch: event.snapshot.time)
        level = event.level.rawValue
        previous = event.previous?.rawValue
        usageBytes = event.snapshot.usageBytes
        limitBytes = event.snapshot.limit?.bytes
        limitCgroup = event.snapshot.limit?.cgroupPath
        cgroupUsageBytes = event.snapshot.cgroupUsageBytes
        ratio = (event.snapshot.ratio * 10_000).rounded() / 10_000
        source = event.source.name
        growthBytesPerSecond = event.forecast.map { $0.growth.bytesPerSecond.rounded() }
        secondsToCritical = event.forecast.map { StatusReport.rounded($0.secondsToCritical) }
        secondsToLimit = event.forecast.map { StatusReport.rounded($0.secondsToLimit) }
    }

    private enum CodingKeys: String, CodingKey {
        case time, level, previous, usageBytes, limitBytes, limitCgroup, cgroupUsageBytes, ratio, source, growthBytesPerSecond, secondsToCritical,
            secondsToLimit
    }

    /// Every line has the same keys: `previous` and `limitBytes` are `null` when absent.
    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(time, forKey: .time)
        try container.encode(level, forKey: .level)
        try container.encode(previous, forKey: .previous)
        try container.encode(usageBytes, forKey: .usageBytes)
        try container.encode(limitBytes, forKey: .limitBytes)
        try container.encode(limitCgroup, forKey: .limitCgroup)
        try container.encode(cgroupUsageBytes, forKey: .cgroupUsageBytes)
        try container.encode(ratio, forKey: .ratio)
        try container.encode(source, forKey: .source)
        try container.encode(growthBytesPerSecond, forKey: .growthBytesPerSecond)
        try container.encode(secondsToCritical, forKey: .secondsToCritical)
        try container.encode(secondsToLimit, forKey: .secondsToLimit)
    }

    func json() throws -> String {
        try JSONLine.encode(self)
    }

    func text() -> String {
        let change = previous.map { "\($0) -> \(level)" } ?? "level \(level)"
        return
            "\(time)  \(change)  \(StatusReport.bytes(usageBytes)) of \(limitBytes.map(StatusReport.bytes) ?? "the system's memory (no cgroup limit)") (\(String(format: "%.1f", ratio * 100))%)  [\(source)]"
            + (secondsToLimit.map { "  limit in \(String(format: "%.1f", $0)) s" } ?? "")
            + (limitCgroup.flatMap { binding in cgroupUsageBytes.map { "  binds: \(binding) (own usage \(StatusReport.bytes($0)))" } } ?? "")
    }
}

import ArgumentParser
import CgroupKit
import Foundation
import Logging
import MemwarnControl
import MemwarnMonitor
import MemwarnSoak
import MemwarnSystem

/// `memwarn status`: one snapshot.
struct StatusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Print one snapshot: usage, effective limit, PSI and the level it means.",
        discussion: """
            It also arms a memory monitor on the cgroup for a moment, as a service of this user \
            would (as root on cgroup v1 it registers usage thresholds there, gone when status \
            exits), and reports how long arming took and how usage reaches the monitor \
            ("monitor": usageWatch thresholds, adaptive-sampling or polling; armedMilliseconds; \
            thresholdsMilliseconds; sources).
            With --all: every memory cgroup at and below the one named (default: this \
            process's own; --cgroup / for the whole hierarchy), one row each, sorted by path: \
            path, the cgroup's own usage, its effective limit, the ratio and the level (no \
            growth is measured). --json prints them as one JSON array of the objects \
            status --json prints. Cgroups that vanish meanwhile are left out, and so are \
            cgroup2 groups without the memory controller (the cgroup2 root among them).
            With --pid: the memory cgroup of that process, and what its control endpoint (a \
            memwarn ControlService of this user or root) says: the ancestors a node agent \
            coordinates for it under a lease (coordinatedCgroups; text: "coordinated by the \
            node agent: PATH (lease)"), and what its own monitor listens to \
            (processMonitorSources; text: "process   its monitor: SOURCE"), systemd's \
            MEMORY_PRESSURE_WATCH among them when the service manager set it. A process \
            without an endpoint is still read, with a note.
            Exit status: 0 on success; 1 when the cgroup does not exist or a file or the \
            policy cannot be read (with --all: when a cgroup that still exists could not be \
            read; the others are printed); 64 for bad arguments.
            Examples:
              memwarn status --json --cgroup /system.slice/app.service
              memwarn status --pid 4242
              memwarn status --all --cgroup /
              memwarn status --all --json --cgroup /system.slice
            """)

    @OptionGroup var target: TargetOptions

    @Flag(name: .long, help: "Every memory cgroup at and below --cgroup (default: this process's own), one row each.")
    var all = false

    @Option(
        name: .long, parsing: .unconditional,
        help: ArgumentHelp("A process: its memory cgroup, and the leases a node agent holds for it (asked of its control endpoint).", valueName: "pid"))
    var pid: Int32?

    @Option(
        name: .customLong("growth-sample"), parsing: .unconditional,
        help: ArgumentHelp(
            "How long to read usage to measure growth (11 readings over this time; 0s for none).", valueName: "DURATION"))
    var growthSample = "500ms"

    func validate() throws {
        if let pid {
            guard pid > 0 else { throw ValidationError("--pid takes a positive process ID; got \(pid)") }
            guard target.cgroup == nil else { throw ValidationError("give either --pid or --cgroup: a process is read in its own cgroup") }
            guard !all else { throw ValidationError("--all reads cgroups, not a process: drop --pid") }
        }
        guard let duration = PressurePolicy.parseDuration(growthSample), duration <= .seconds(60) else {
            throw ValidationError("--growth-sample must be a duration such as 500ms or 2s, at most 60s; got \"\(growthSample)\"")
        }
    }

    func run() async throws {
        let policy = try PressurePolicy.load(file: target.config, environment: ProcessInfo.processInfo.environment)
        let discovery = CgroupDiscovery()
        if let pid, !Signals.processExists(pid) { throw CgroupError(.notFound, "no process with pid \(pid)") }
        let layout = try target.cgroup.map { try discovery.layout(cgroupPath: $0) } ?? discovery.layout(pid: pid)
        // What `memwarn run`s killed before they could clean up left under this process's cgroup.
        if let own = try? discovery.layout().memory {
            var logger = Logger(label: "memwarn")
            logger.logLevel = .error
            for leftover in ConstrainedRun.removeLeftovers(in: own, logger: logger) {
                Output.errorLine("memwarn status: \(leftover)")
            }
        }
        if all {
            guard let root = layout.memory else {
                throw CgroupError(.noMemoryController, "no memory controller is mounted (mode \(layout.mode.rawValue))")
            }
            let tree = StatusTree(root: root, policy: policy, discovery: discovery)
            print(target.json ? try JSONLine.encode(tree.reports) : tree.text())
            for failure in tree.failures { Output.errorLine("Error: \(failure)") }
            if !tree.failures.isEmpty { throw ExitCode(1) }
            return
        }
        let sampler = SnapshotSampler(layout: layout, policy: policy)
        // A monitor armed here as a service's would be (this user, this environment): how long
        // arming takes and how usage reaches it. Its thresholds register while growth is measured.
        var logger = Logger(label: "memwarn")
        logger.logLevel = .critical
        let monitor = PressureMonitor(
            configuration: MonitorConfiguration(policy: policy, cgroupPath: pid == nil ? target.cgroup : layout.memory?.path), logger: logger)
        let span = PressurePolicy.parseDuration(growthSample) ?? .zero
        let (snapshot, forecast) =
            span > .zero
            ? try await PressureForecast.measure(sampler: sampler, readings: 11, interval: span / 10, policy: policy)
            : (try sampler.sample(), nil)
        let level = PressureMonitor.level(of: snapshot, policy: policy)
        var report = StatusReport(
            layout: layout, snapshot: snapshot, level: level, forecast: forecast, policy: policy,
            monitor: await Self.summary(of: monitor))
        if let pid { report.addEndpointStatus(of: pid) }
        if target.json {
            print(try report.json())
        } else {
            print(report.text(policy: policy))
        }
    }

    /// What the monitor armed here did; waits up to a second for thresholds still being
    /// registered (cgroup v1 as root).
    static func summary(of monitor: PressureMonitor) async -> StatusReport.MonitorSummary {
        guard let arming = monitor.arming else {
            let error: String
            do {
                try await monitor.run()
                error = "unknown"
            } catch let failure {
                error = "\(failure)"
            }
            return .init(usageWatch: "none", armedMilliseconds: 0, sources: [], error: error)
        }
        var thresholds: Double?
        if arming.pendingThresholds > 0 {
            let deadline = ContinuousClock.now + .seconds(1)
            while monitor.usageWatch != .thresholds && ContinuousClock.now < deadline {
                try? await Task.sleep(for: .milliseconds(5))
            }
            thresholds = monitor.arming?.thresholdsRegisteredAfter.map(milliseconds)
        }
        return .init(
            usageWatch: (monitor.usageWatch ?? arming.usageWatch).name, armedMilliseconds: milliseconds(arming.duration),
            thresholdsMilliseconds: thresholds, sources: monitor.watchedSources, error: nil)
    }

    /// Milliseconds to a tenth.
    private static func milliseconds(_ duration: Duration) -> Double { (duration.seconds * 10_000).rounded() / 10 }
}

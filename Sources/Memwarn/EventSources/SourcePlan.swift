import CgroupKit
import Logging
#if canImport(Glibc)
import Glibc
#endif

/// The sources a monitor listens to, made from the cgroup layout, the first reading, the policy
/// and the environment: event-driven where the kernel offers events, polling where it does not
/// (the documented fallbacks), each with the reason.
struct SourcePlan {
    /// The sources, in the order they were made.
    private(set) var sources: [any PressureSource] = []
    /// What the monitor listens to, one line a source, with the notes on what it could not
    /// listen to (``PressureMonitor/watchedSources``).
    private(set) var lines: [String] = []

    /// Whether usage is polled (no event tells of its changes), which bounds detection by the
    /// poll interval.
    var pollsUsage: Bool { sources.contains { $0 is UsagePoll } }

    /// Makes the sources.
    ///
    /// - Parameters:
    ///   - snapshot: the first reading (its limit sets the v1 usage thresholds).
    ///   - logger: told of each fallback.
    ///   - policy: the marks, the poll interval and the PSI settings.
    ///   - environment: read for systemd's `MEMORY_PRESSURE_WATCH` and `MEMORY_PRESSURE_WRITE`.
    ///   - watchesPressureStall: whether to register PSI triggers (or their fallback).
    /// - Throws: ``CgroupError`` when a source the kernel offers cannot be made (a cgroup file
    ///   that cannot be read, a trigger systemd asked for that the kernel refuses);
    ///   ``SystemError`` when the system is out of eventfds or inotify instances.
    init(sampler: SnapshotSampler, snapshot: PressureSnapshot, policy: PressurePolicy, environment: [String: String],
         watchesPressureStall: Bool, logger: Logger) throws {
        if let cgroup = sampler.layout.memory {
            switch cgroup.version {
            case .v1: try planV1(cgroup, snapshot: snapshot, files: sampler.files, policy: policy, logger: logger)
            case .v2:
                add(UsagePoll(cgroup.file("memory.current"), every: policy.pollInterval, because: "cgroup v2 has no usage thresholds"))
                add(try MemoryEventsWatch(cgroup: cgroup, files: sampler.files))
            }
        } else {
            add(UsagePoll("/proc/meminfo", every: policy.pollInterval, because: "no memory controller"))
        }
        if watchesPressureStall { try planPressureStall(sampler, policy: policy, logger: logger) }
        if let systemd = try SystemdPressureWatch.fromEnvironment(environment) { add(systemd) }
    }

    private mutating func add(_ source: any PressureSource) {
        sources.append(source)
        lines.append(source.description)
    }

    /// The v1 sources, all through `cgroup.event_control`: usage thresholds (or polling without a
    /// limit), OOM and pressure-level notifications. A user who may not write
    /// `cgroup.event_control` (it is root's) gets usage polled instead.
    private mutating func planV1(_ cgroup: CgroupLocation, snapshot: PressureSnapshot, files: KernelFiles, policy: PressurePolicy,
                                 logger: Logger) throws {
        let before = sources.count
        do {
            if let limit = snapshot.limit?.bytes {
                for ratio in Self.thresholdRatios(policy) {
                    let bytes = UInt64(Double(limit) * ratio)
                    add(try CgroupV1Notification(
                        cgroup: cgroup, file: "memory.usage_in_bytes", argument: String(bytes), files: files, hint: .normal, signal: .usageThreshold,
                        description: "usage-threshold \(bytes) bytes (\(Int((ratio * 100).rounded()))% of \(limit))"))
                }
            } else {
                add(UsagePoll("/proc/meminfo", every: policy.pollInterval, because: "no cgroup limit"))
            }
            add(try CgroupV1Notification(cgroup: cgroup, file: "memory.oom_control", argument: "", files: files, hint: .critical, signal: .oom,
                                         description: "oom-control"))
            for (level, argument) in [(MemoryPressureLevel.warning, "medium"), (.critical, "critical")] {
                add(try CgroupV1Notification(cgroup: cgroup, file: "memory.pressure_level", argument: argument, files: files, hint: level,
                                             signal: .pressureLevel, quietTime: policy.pressureLevelQuietTime,
                                             description: "pressure-level \(argument)"))
            }
        } catch let error as CgroupError where error.code == .permissionDenied || error.errno == EACCES || error.errno == EPERM {
            for source in sources[before...] { source.tearDown() }
            sources.removeSubrange(before...)
            lines.removeSubrange(before...)
            add(UsagePoll(cgroup.file("memory.usage_in_bytes"), every: policy.pollInterval,
                          because: "v1 notifications need write access to cgroup.event_control, which is root's"))
            logger.notice("cgroup v1 notifications are not permitted for this user; polling usage instead", metadata: [
                "cgroup": "\(cgroup.directory)", "pollInterval": "\(policy.pollInterval)", "error": "\(error)",
            ])
        }
    }

    /// The v1 usage thresholds: the recovery, warning and critical marks, and every 5 % of the
    /// limit from half of it up, so a climb gives the growth estimate an event-driven reading
    /// each twentieth of the limit (a crossing wakes the monitor in about a millisecond).
    static func thresholdRatios(_ policy: PressurePolicy) -> [Double] {
        let steps = (10...19).map { Double($0) * 0.05 }
        var ratios = [policy.recoveryRatio, policy.warningRatio, policy.criticalRatio].filter { $0 <= 1 }
        for step in steps where !ratios.contains(where: { abs($0 - step) < 0.01 }) { ratios.append(step) }
        return ratios.sorted()
    }

    /// PSI: a trigger for `some` (warning) and one for `full` (critical) on the cgroup2 group's
    /// `memory.pressure` or the system's, or the sampling fallback where the kernel refuses one.
    private mutating func planPressureStall(_ sampler: SnapshotSampler, policy: PressurePolicy, logger: Logger) throws(CgroupError) {
        guard let path = sampler.pressureFile else {
            lines.append("no PSI (kernel without /proc/pressure)")
            return
        }
        let privileged = (try? Capabilities.effective(Capabilities.sysResource, files: sampler.files)) ?? false
        for (kind, percent, level) in [(StallKind.some, policy.psiSomeWarningPercent, MemoryPressureLevel.warning),
                                       (.full, policy.psiFullCriticalPercent, .critical)] {
            switch try PressureWatch.make(path: path, kind: kind, percent: percent, window: policy.psiWindow, privileged: privileged,
                                          files: sampler.files) {
            case .trigger(let trigger):
                trigger.level = level
                add(trigger)
            case .sampling(let fallback):
                logger.notice("PSI trigger refused; sampling instead", metadata: ["path": "\(path)", "reason": "\(fallback.reason)"])
                add(PressureStallSampling(fallback, level: level, every: policy.pollInterval, files: sampler.files, logger: logger))
            }
        }
    }
}

import CgroupKit
import Logging
import MemwarnRelease
import MemwarnSystem

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
    /// listen to (`watchedSources`); the usage sampler's line is its own.
    private(set) var lines: [String] = []

    /// The usage sampler: continuous where the kernel sends no usage events, in guard bands on
    /// cgroup v1 as root. Not among ``sources``: nothing to watch, it is scheduled by the engine.
    private(set) var usageSampling: UsageSampling?
    /// cgroup v1 as root: the usage thresholds and guards, registered after arming, off the loop
    /// thread (``ThresholdRegistrar``); usage is sampled continuously until they are in.
    private(set) var pendingThresholds: ThresholdRegistrar.Plan?
    /// cgroup v1 as root: the cgroup whose usage thresholds this user may register — with a
    /// limit or not yet — so that they can be planned again when a limit changes.
    private(set) var thresholdCgroup: CgroupLocation?

    /// Makes the sources.
    ///
    /// - Parameters:
    ///   - snapshot: the first reading (its limit sets the v1 usage thresholds).
    ///   - logger: told of each fallback.
    ///   - policy: the marks, the sampling bounds and the PSI settings.
    ///   - environment: read for systemd's `MEMORY_PRESSURE_WATCH` and `MEMORY_PRESSURE_WRITE`.
    ///   - watchesPressureStall: whether to register PSI triggers (or their fallback).
    /// - Throws: `CgroupError` when a source the kernel offers cannot be made (a cgroup file
    ///   that cannot be read);
    ///   ``SystemError`` when the system is out of eventfds or inotify instances.
    init(
        sampler: SnapshotSampler, snapshot: PressureSnapshot, policy: PressurePolicy, environment: [String: String],
        watchesPressureStall: Bool, logger: Logger
    ) throws {
        let noLimit = snapshot.limit == nil
        if let cgroup = sampler.layout.memory {
            switch cgroup.version {
            case .v1: try planV1(cgroup, snapshot: snapshot, files: sampler.files, policy: policy, logger: logger)
            case .v2:
                try addSampling(
                    cgroup, noLimit: noLimit, policy: policy, files: sampler.files,
                    because: noLimit ? "no cgroup limit" : "cgroup v2 has no usage thresholds")
                add(try MemoryEventsWatch(cgroup: cgroup, files: sampler.files))
            }
            do {
                if let limits = try LimitWatch(cgroup: cgroup, files: sampler.files) { add(limits) }
            } catch {
                // Optional: without it a changed limit is seen at the next full reading.
                lines.append("no inotify on the limit files (\(error)): a changed limit is seen at the next full reading")
                logger.warning(
                    "memory monitor: the limit files cannot be watched; a changed limit is seen at the next full reading",
                    metadata: ["error": "\(error)"])
            }
        } else {
            try addSampling(nil, noLimit: true, policy: policy, files: sampler.files, because: "no memory controller")
        }
        if watchesPressureStall { try planPressureStall(sampler, policy: policy, logger: logger) }
        addSystemdWatch(environment, logger: logger)
    }

    /// systemd's watch (`MemoryPressureWatch=`), when the environment names one. One that cannot
    /// be used — a path that cannot be opened, a `MEMORY_PRESSURE_WRITE` that is not base64 or
    /// that the kernel refuses as a trigger — is said (a line among the sources, a warning in the
    /// log) and left out: the monitor arms with its own sources, which watch the same cgroup.
    private mutating func addSystemdWatch(_ environment: [String: String], logger: Logger) {
        do {
            if let systemd = try SystemdPressureWatch.fromEnvironment(environment) { add(systemd) }
        } catch {
            let path = environment[SystemdPressureWatch.watchVariable] ?? ""
            lines.append("systemd \(path) not watched (\(error)): the monitor's own sources watch")
            logger.warning(
                "memory monitor: the pressure watch systemd named cannot be used; the monitor's own sources watch",
                metadata: ["watch": "\(path)", "error": "\(error)"])
        }
    }

    private mutating func addSampling(
        _ cgroup: CgroupLocation?, noLimit: Bool, policy: PressurePolicy,
        files: KernelFiles, because reason: String
    ) throws(CgroupError) {
        usageSampling = try UsageSampling(cgroup: cgroup, measuresSystem: noLimit, policy: policy, files: files, because: reason)
    }

    private mutating func add(_ source: any PressureSource) {
        sources.append(source)
        lines.append(source.description)
    }

    /// The v1 sources, all through `cgroup.event_control`: OOM and pressure-level notifications
    /// at once; usage sampled continuously until the usage thresholds — and a guard threshold
    /// below each level mark — are registered in the background (``pendingThresholds``), after
    /// which usage is sampled only inside the guard bands. Without a limit usage is sampled. A
    /// user who may not write `cgroup.event_control` (it is root's) gets usage sampled
    /// continuously instead.
    private mutating func planV1(
        _ cgroup: CgroupLocation, snapshot: PressureSnapshot, files: KernelFiles, policy: PressurePolicy,
        logger: Logger
    ) throws {
        let before = sources.count
        do {
            // First: the write that tells whether this user may register notifications at all.
            add(
                try CgroupV1Notification(
                    cgroup: cgroup, file: "memory.oom_control", argument: "", files: files, hint: .critical, signal: .oom,
                    description: "oom-control"))
            for (hint, argument) in [(WakeHint.warning, "medium"), (.critical, "critical")] {
                add(
                    try CgroupV1Notification(
                        cgroup: cgroup, file: "memory.pressure_level", argument: argument, files: files, hint: hint,
                        signal: .pressureLevel, quietTime: policy.pressureLevelQuietTime,
                        description: "pressure-level \(argument)"))
            }
        } catch let error as CgroupError where error.code == .permissionDenied || [EACCES, EPERM, EROFS].contains(error.errno ?? 0) {
            // Root's file, or a mount made read-only (a container's, a node agent's view of the
            // host's tree): the same as a user who may not write it.
            for source in sources[before...] { source.tearDown() }
            sources.removeSubrange(before...)
            lines.removeSubrange(before...)
            let readOnly = error.errno == EROFS
            try addSampling(
                cgroup, noLimit: snapshot.limit == nil, policy: policy, files: files,
                because: readOnly
                    ? "v1 notifications need write access to cgroup.event_control, and the cgroup mount is read-only"
                    : "v1 notifications need write access to cgroup.event_control, which is root's")
            logger.notice(
                readOnly
                    ? "the cgroup mount is read-only: no cgroup v1 notifications; sampling usage instead"
                    : "cgroup v1 notifications are not permitted for this user; sampling usage instead",
                metadata: [
                    "cgroup": "\(cgroup.directory)", "worstCaseGrowth": "\(policy.worstCaseGrowthBytesPerSecond)",
                    "pollInterval": "\(policy.pollInterval)", "error": "\(error)",
                ])
            return
        }
        thresholdCgroup = cgroup
        guard !snapshot.constraintsToWatch.isEmpty else {
            try addSampling(cgroup, noLimit: true, policy: policy, files: files, because: "no cgroup limit")
            return
        }
        try addSampling(
            cgroup, noLimit: false, policy: policy, files: files,
            because: "until the usage thresholds are registered, then only in the guard bands below the marks")
        pendingThresholds = ThresholdRegistrar.Plan(
            files: files,
            requests: Self.thresholdRequests(for: snapshot.constraintsToWatch, of: cgroup, sampling: usageSampling!, policy: policy))
    }

    /// The v1 usage thresholds for every limit that applies: on the usage of each cgroup whose
    /// limit it is (an ancestor's usage counts its siblings); a hidden limit's on the cgroup's own
    /// usage, the part that can be read.
    static func thresholdRequests(
        for constraints: [MemoryConstraint], of cgroup: CgroupLocation, sampling: UsageSampling,
        policy: PressurePolicy
    ) -> [ThresholdRegistrar.Request] {
        var requests: [ThresholdRegistrar.Request] = []
        for constraint in constraints where !constraint.isNodeFloor {  // the node's floor has no usage file to register on
            let location = constraint.isHidden ? cgroup : CgroupLocation(version: .v1, mountPoint: cgroup.mountPoint, path: constraint.cgroupPath)
            requests += thresholdRequests(
                limit: constraint.limit.bytes, band: sampling.guardBand(capacity: constraint.limit.bytes),
                policy: policy, cgroup: location, gauge: UsageSampling.key(of: constraint),
                naming: constraint.cgroupPath == cgroup.path ? nil : constraint.cgroupPath)
        }
        return requests
    }

    /// The v1 usage thresholds to register for a limit on `cgroup`'s usage: each level mark and
    /// the guard `band` below it first, then the other 5 % steps (``LevelMarks/thresholdRatios``); a byte
    /// count once. `naming` (an ancestor's path) goes into each line.
    static func thresholdRequests(
        limit: UInt64, band: UInt64, policy: PressurePolicy, cgroup: CgroupLocation, gauge: String,
        naming ancestor: String? = nil
    ) -> [ThresholdRegistrar.Request] {
        func percent(_ ratio: Double) -> Int { Int((ratio * 100).rounded()) }
        var requests: [ThresholdRegistrar.Request] = []
        let of = ancestor.map { " of \($0)" } ?? ""
        func add(_ bytes: UInt64, _ description: String) {
            if !requests.contains(where: { $0.bytes == bytes }) {
                requests.append(.init(cgroup: cgroup, gauge: gauge, bytes: bytes, description: description))
            }
        }
        let marks = LevelMarks(policy: policy, capacityBytes: limit)
        for (ratio, mark) in [(marks.warningRatio, marks.warningBytes), (marks.criticalRatio, marks.criticalBytes), (marks.recoveryRatio, marks.recoveryBytes)]
        where ratio <= 1 {
            add(mark, "usage-threshold\(of) \(mark) bytes (\(percent(ratio))% of \(limit))")
            if mark > band { add(mark - band, "usage-guard\(of) \(mark - band) bytes (\(ByteSize.describe(band)) below the \(percent(ratio))% mark)") }
        }
        for (ratio, bytes) in zip(marks.thresholdRatios, marks.thresholdBytes) {
            add(bytes, "usage-threshold\(of) \(bytes) bytes (\(percent(ratio))% of \(limit))")
        }
        return requests
    }

    /// PSI: a trigger for `some` (warning) and one for `full` (critical) on the cgroup2 group's
    /// `memory.pressure` or the system's, or the sampling fallback where the kernel refuses one.
    private mutating func planPressureStall(_ sampler: SnapshotSampler, policy: PressurePolicy, logger: Logger) throws(CgroupError) {
        guard let path = sampler.pressureFile else {
            lines.append("no PSI (kernel without /proc/pressure)")
            return
        }
        let privileged = (try? Capabilities.effective(Capabilities.sysResource, files: sampler.files)) ?? false
        for (kind, percent, level) in [
            (StallKind.some, policy.psiSomeWarningPercent, MemoryPressureLevel.warning),
            (.full, policy.psiFullCriticalPercent, .critical),
        ] {
            switch try PressureWatch.make(
                path: path, kind: kind, percent: percent, window: policy.psiWindow, privileged: privileged,
                files: sampler.files)
            {
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

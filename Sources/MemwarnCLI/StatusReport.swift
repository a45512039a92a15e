import CgroupKit
import Foundation
import MemwarnMonitor
import MemwarnRelease
import MemwarnSystem

#if canImport(Glibc)
import Glibc
#endif

/// The JSON and text forms of a snapshot, shared by `status` and `watch`.
struct StatusReport: Encodable {
    struct Pressure: Encodable {
        var some: PressureStall.Line
        var full: PressureStall.Line?
        var file: String?
    }

    var mode: String
    var cgroupPath: String?
    var cgroupDirectory: String?
    /// `cgroup` when usage is measured against a cgroup limit, `system` when no limit applies.
    var measure: String
    var usageBytes: UInt64
    /// The memory cgroup's own charge (`memory.usage_in_bytes`, `memory.current`, less its
    /// inactive page cache under `inactive_page_cache = ignore`): the same as `usageBytes` when
    /// measured against its own limit, and still the cgroup's when the system is measured; `nil`
    /// without a readable memory cgroup.
    var cgroupUsageBytes: UInt64?
    var limitBytes: UInt64?
    var limitFile: String?
    var limitCgroup: String?
    /// Every limit that applies (the cgroup's own and each limited ancestor's), nearest first,
    /// each with the usage it is measured against and the policy's marks on it; the binding one
    /// has `binding: true`.
    var limits: [Limit]
    /// Ancestors whose limits a node agent coordinates for the watched process: with `--pid`,
    /// the process's own, as its control endpoint says; else none (the monitor `status` arms
    /// holds no lease).
    var coordinatedCgroups: [String]
    /// With `--pid`: what the process's own monitor listens to, as its control endpoint says
    /// (systemd's `MEMORY_PRESSURE_WATCH` among them when the service manager set it); `nil`
    /// without `--pid` or without an endpoint.
    var processMonitorSources: [String]?
    var systemTotalBytes: UInt64?
    var ratio: Double
    var level: String
    var psi: Pressure?
    var growthBytesPerSecond: Double?
    var secondsToCritical: Double?
    var secondsToLimit: Double?
    /// What a monitor made here does: how long it took to arm, how usage reaches it, its sources.
    var monitor: MonitorSummary?
    var notes: [String]

    /// One limit that applies, with the usage it is measured against.
    struct Limit: Encodable {
        var cgroup: String
        var file: String
        var usageBytes: UInt64
        var limitBytes: UInt64
        var headroomBytes: UInt64
        var binding: Bool
        /// Set above the cgroup namespace: usage is the cgroup's own, a lower bound.
        var hidden: Bool
        /// The inactive page cache left out of `usageBytes` (`inactive_page_cache = ignore`);
        /// `null` when it is counted.
        var inactiveFileBytes: UInt64?
        /// Where the policy's marks lie on this limit.
        var marks: Marks

        private enum CodingKeys: String, CodingKey {
            case cgroup, file, usageBytes, limitBytes, headroomBytes, binding, hidden, inactiveFileBytes, marks
        }

        /// Every key, `inactiveFileBytes` as `null` when page cache is counted, as every other
        /// key of `status --json` that has no value.
        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(cgroup, forKey: .cgroup)
            try container.encode(file, forKey: .file)
            try container.encode(usageBytes, forKey: .usageBytes)
            try container.encode(limitBytes, forKey: .limitBytes)
            try container.encode(headroomBytes, forKey: .headroomBytes)
            try container.encode(binding, forKey: .binding)
            try container.encode(hidden, forKey: .hidden)
            try container.encode(inactiveFileBytes, forKey: .inactiveFileBytes)
            try container.encode(marks, forKey: .marks)
        }
    }

    /// The policy's marks on one limit: where `warning` and `critical` begin, and `recovery`,
    /// below which the level steps back to normal.
    struct Marks: Encodable {
        var warning: Mark
        var critical: Mark
        var recovery: Mark

        /// The marks of `policy` on a limit of `limitBytes`.
        init(policy: PressurePolicy, limitBytes: UInt64) {
            let marks = LevelMarks(policy: policy, capacityBytes: limitBytes)
            warning = Mark(ratio: marks.warningRatio, bytes: marks.warningBytes)
            critical = Mark(ratio: marks.criticalRatio, bytes: marks.criticalBytes)
            recovery = Mark(ratio: marks.recoveryRatio, bytes: marks.recoveryBytes)
        }
    }

    /// One mark: its ratio of the limit, and the usage in bytes where it lies (the ratio times
    /// the limit, rounded down, as the monitor places it: `LevelMarks`).
    struct Mark: Encodable {
        var ratio: Double
        var bytes: UInt64
    }

    /// A monitor armed by `status` on the cgroup, as a service's would be.
    struct MonitorSummary: Encodable {
        /// `thresholds`, `adaptive-sampling` or `polling` (see `UsageWatch`).
        var usageWatch: String
        /// From creating the monitor to armed, in milliseconds.
        var armedMilliseconds: Double
        /// cgroup v1 as root: how long the usage thresholds took to register after arming, in
        /// milliseconds (`nil` where there are none, or when they took longer than status waited).
        var thresholdsMilliseconds: Double?
        var sources: [String]
        /// Why the monitor could not be armed, if it could not.
        var error: String?
    }

    init(
        layout: CgroupLayout, snapshot: PressureSnapshot, level: MemoryPressureLevel, forecast: PressureForecast?, policy: PressurePolicy,
        monitor: MonitorSummary? = nil
    ) {
        self.monitor = monitor
        mode = layout.mode.rawValue
        cgroupPath = snapshot.cgroup?.path
        cgroupDirectory = snapshot.cgroup?.directory
        measure = snapshot.limit == nil ? "system" : "cgroup"
        usageBytes = snapshot.usageBytes
        cgroupUsageBytes = snapshot.cgroupUsageBytes ?? layout.memory.flatMap { try? CgroupMemoryReader(location: $0).usage() }
        let binding = snapshot.binding
        limits = snapshot.constraints.map { constraint in
            Limit(
                cgroup: constraint.cgroupPath, file: constraint.limit.file, usageBytes: constraint.usageBytes, limitBytes: constraint.limit.bytes,
                headroomBytes: constraint.headroomBytes, binding: constraint == binding, hidden: constraint.isHidden,
                inactiveFileBytes: constraint.inactiveFileBytes, marks: Marks(policy: policy, limitBytes: constraint.limit.bytes))
        }
        coordinatedCgroups = snapshot.coordinatedCgroups
        limitBytes = snapshot.limit?.bytes
        limitFile = snapshot.limit?.file
        limitCgroup = snapshot.limit?.cgroupPath
        systemTotalBytes = snapshot.system?.totalBytes
        ratio = (snapshot.ratio * 10_000).rounded() / 10_000
        self.level = level.rawValue
        psi = snapshot.pressure.map { Pressure(some: $0.some, full: $0.full, file: snapshot.pressureFile) }
        growthBytesPerSecond = forecast.map { $0.growth.bytesPerSecond.rounded() }
        secondsToCritical = forecast.map { Self.rounded($0.secondsToCritical) }
        secondsToLimit = forecast.map { Self.rounded($0.secondsToLimit) }
        var notes = layout.notes
        if snapshot.limit == nil {
            notes.append("no cgroup limit applies: usage is the system's MemTotal - MemAvailable")
        }
        if let binding, binding.cgroupPath != snapshot.cgroup?.path {
            notes.append(
                "an ancestor's limit binds: \(binding.cgroupPath) holds \(Self.bytes(binding.usageBytes)) of its \(Self.bytes(binding.limit.bytes)) "
                    + "(every cgroup below it counted), \(Self.bytes(binding.headroomBytes)) left")
        }
        if let memory = snapshot.cgroup, CgroupMemoryReader(location: memory).ancestorsHiddenByNamespace() {
            notes.append(
                "this process runs in a cgroup namespace: the cgroups above \(memory.mountPoint) cannot be read here, "
                    + "and a limit set there (a pod's, a slice's) is not counted (cgroup v2 reports no hierarchical limit)")
        }
        for hidden in snapshot.constraints where hidden.isHidden {
            notes.append(
                "a limit of \(Self.bytes(hidden.limit.bytes)) is set above the cgroup namespace (hierarchical_memory_limit): "
                    + "its cgroup cannot be read here, so only this cgroup's own usage is measured against it")
        }
        if snapshot.constraints.contains(where: { $0.inactiveFileBytes != nil }) {
            notes.append(
                "inactive page cache is left out (inactive_page_cache = ignore): each limit's usage is its cgroup's less its inactive "
                    + "file pages, which the kernel reclaims first at the limit")
        }
        if let memory = layout.memory, memory.version == .v1, !FileSystem.isWritable(memory.file("cgroup.event_control")) {
            notes.append("cgroup.event_control is root's: a monitor run by this user samples usage instead of v1 notifications")
        }
        self.notes = notes
    }

    private enum CodingKeys: String, CodingKey {
        case mode, cgroupPath, cgroupDirectory, measure, usageBytes, cgroupUsageBytes, limitBytes, limitFile, limitCgroup, limits, coordinatedCgroups
        case processMonitorSources, systemTotalBytes, ratio, level, psi, growthBytesPerSecond, secondsToCritical, secondsToLimit, monitor, notes
    }

    /// Seconds to a tenth.
    static func rounded(_ seconds: Double) -> Double { (seconds * 10).rounded() / 10 }

    /// Every key is always present; an absent value is `null` (synthesized encoding would
    /// leave the key out, and `limitBytes: null` is how "no limit" reads).
    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(mode, forKey: .mode)
        try container.encode(cgroupPath, forKey: .cgroupPath)
        try container.encode(cgroupDirectory, forKey: .cgroupDirectory)
        try container.encode(measure, forKey: .measure)
        try container.encode(usageBytes, forKey: .usageBytes)
        try container.encode(cgroupUsageBytes, forKey: .cgroupUsageBytes)
        try container.encode(limitBytes, forKey: .limitBytes)
        try container.encode(limitFile, forKey: .limitFile)
        try container.encode(limitCgroup, forKey: .limitCgroup)
        try container.encode(limits, forKey: .limits)
        try container.encode(coordinatedCgroups, forKey: .coordinatedCgroups)
        try container.encode(processMonitorSources, forKey: .processMonitorSources)
        try container.encode(systemTotalBytes, forKey: .systemTotalBytes)
        try container.encode(ratio, forKey: .ratio)
        try container.encode(level, forKey: .level)
        try container.encode(psi, forKey: .psi)
        try container.encode(growthBytesPerSecond, forKey: .growthBytesPerSecond)
        try container.encode(secondsToCritical, forKey: .secondsToCritical)
        try container.encode(secondsToLimit, forKey: .secondsToLimit)
        try container.encode(monitor, forKey: .monitor)
        try container.encode(notes, forKey: .notes)
    }

    func json() throws -> String {
        try JSONLine.encode(self)
    }

    /// What the control endpoint of `pid` (`status --pid`) says of the node agent's leases and of
    /// its monitor's sources: ``coordinatedCgroups`` and ``processMonitorSources``, or a note
    /// saying why they are unknown.
    mutating func addEndpointStatus(of pid: Int32) {
        do {
            let status = try ServiceEndpoint.status(of: pid)
            coordinatedCgroups = status.coordinatedCgroups
            processMonitorSources = status.monitorSources.map(Output.printable)
        } catch {
            let why = error.code == .noEndpoint ? error.message : "process \(pid)'s control endpoint could not be asked: \(error.message)"
            notes.append(Output.printable(why) + "; the leases a node agent may hold for it and its monitor's sources are unknown")
            return
        }
        if !coordinatedCgroups.isEmpty {
            notes.append(
                "process \(pid)'s own monitor leaves the limits a node agent coordinates (coordinatedCgroups) to the agent; this snapshot counts every limit")
        }
    }

    func text(policy: PressurePolicy) -> String {
        let width = 40
        let filled = min(width, Int((ratio * Double(width)).rounded()))
        let bar = String(repeating: "#", count: filled) + String(repeating: ".", count: width - filled)
        var lines = [
            "level     \(level)",
            "usage     [\(bar)] \(String(format: "%.1f", ratio * 100))%",
            "          \(Self.bytes(usageBytes)) of "
                + (limitBytes.map(Self.bytes) ?? systemTotalBytes.map { "the system's \(Self.bytes($0)) (no cgroup limit)" } ?? "no limit")
                + (limitFile.map { " (\($0) of \(limitCgroup ?? "?"))" } ?? ""),
            "marks     warning \(Int(policy.warningRatio * 100))%, critical \(Int(policy.criticalRatio * 100))%, normal below \(Int(policy.recoveryRatio * 100))%",
            "cgroup    \(cgroupDirectory ?? "none") (\(mode))" + (cgroupUsageBytes.map { ", its own usage \(Self.bytes($0))" } ?? ""),
        ]
        for limit in limits {
            lines.append(
                (limit.binding ? "binds     " : "limit     ") + "\(limit.cgroup): \(Self.bytes(limit.usageBytes))"
                    + (limit.inactiveFileBytes.map { " (less \(Self.bytes($0)) of inactive page cache)" } ?? "")
                    + " of \(Self.bytes(limit.limitBytes)) (\(limit.file)), \(Self.bytes(limit.headroomBytes)) left"
                    + (limit.hidden ? " [set above the cgroup namespace]" : ""))
        }
        for cgroup in coordinatedCgroups { lines.append("agent     coordinated by the node agent: \(cgroup) (lease)") }
        for source in processMonitorSources ?? [] { lines.append("process   its monitor: \(source)") }
        if let systemTotalBytes { lines.append("system    \(Self.bytes(usageBytes)) used of \(Self.bytes(systemTotalBytes))") }
        if let psi {
            lines.append("psi some  avg10 \(psi.some.avg10)%  avg60 \(psi.some.avg60)%  avg300 \(psi.some.avg300)%")
            if let full = psi.full { lines.append("psi full  avg10 \(full.avg10)%  avg60 \(full.avg60)%  avg300 \(full.avg300)%") }
        }
        if let growthBytesPerSecond, let secondsToLimit {
            let reaching = limitBytes == nil ? "the system's memory full" : "the limit"
            lines.append("growth    \(Self.bytes(UInt64(max(0, growthBytesPerSecond))))/s: \(reaching) in \(String(format: "%.1f", secondsToLimit)) s")
        } else {
            lines.append("growth    none measured")
        }
        if let monitor {
            if let error = monitor.error {
                lines.append("monitor   could not be armed: \(error)")
            } else {
                let watch =
                    switch monitor.usageWatch {
                    case "thresholds": "usage thresholds (kernel events), sampled in the guard bands below the marks"
                    case "adaptive-sampling": "usage sampled adaptively (no usage events here)"
                    default: "usage polled every poll_interval (adaptive sampling off)"
                    }
                let thresholds = monitor.thresholdsMilliseconds.map { String(format: "; thresholds registered %.0f ms later", $0) } ?? ""
                lines.append("monitor   armed in \(String(format: "%.1f", monitor.armedMilliseconds)) ms\(thresholds); \(watch)")
            }
        }
        lines += notes.map { "note      \($0)" }
        return lines.joined(separator: "\n")
    }

    static func bytes(_ value: UInt64) -> String { ByteSize.describe(value) }
}

import CgroupKit
import MemwarnSystem

/// One reading of what the agent guards: the parent cgroup's binding limit (its own or a limited
/// ancestor's, with that cgroup's usage) and/or the node's floor (`MemTotal - MemAvailable`
/// against `MemTotal - min-available`); the one nearer its limit counts.
package struct ParentReading: Sendable, Hashable {
    package var usageBytes: UInt64
    package var capacityBytes: UInt64
    /// What was measured: `/kubepods.slice (memory.max)` or `node (MemAvailable floor 500.0 MiB)`.
    package var measure: String
    package var ratio: Double { capacityBytes == 0 ? 1 : Double(usageBytes) / Double(capacityBytes) }
    /// Bytes to release to be back under `ratio` of the capacity.
    package func excess(over ratio: Double) -> UInt64 {
        let mark = UInt64(Double(capacityBytes) * ratio)
        return usageBytes > mark ? usageBytes - mark : 0
    }
}

/// Reads the parent (and the node) for the agent.
struct ParentGauge {
    let parent: CgroupLocation?
    let minAvailableBytes: UInt64?
    let files: KernelFiles

    /// What is guarded, each measure with its limit: `/shared.slice (memory.max) and node
    /// (MemAvailable floor 500.0 MiB)` (``read()`` gives the nearer one).
    ///
    /// - Throws: CgroupKit's `CgroupError` when a file cannot be read.
    func describe() throws(CgroupError) -> String {
        var parts: [String] = []
        if let parent, let own = try CgroupMemoryReader(location: parent, files: files).constraints(includingAncestors: false).first {
            parts.append("\(own.cgroupPath) (\(own.limit.file))")
        }
        if let minAvailableBytes { parts.append("node (MemAvailable floor \(ByteSize.describe(minAvailableBytes)))") }
        return parts.joined(separator: " and ")
    }

    /// - Throws: CgroupKit's `CgroupError` when a file cannot be read, or `.unsupported` when
    ///   nothing has a limit (a parent without one, and no `--min-available`).
    func read() throws(CgroupError) -> ParentReading {
        var readings: [ParentReading] = []
        if let parent {
            // The parent's own limit (the one the agent leases); limits above it stay each service's own.
            let constraints = try CgroupMemoryReader(location: parent, files: files).constraints(includingAncestors: false)
            if let binding = MemoryConstraint.binding(constraints) {
                readings.append(
                    ParentReading(
                        usageBytes: binding.usageBytes, capacityBytes: binding.limit.bytes,
                        measure: "\(binding.cgroupPath) (\(binding.limit.file))"))
            }
        }
        if let minAvailableBytes {
            let memory = try SystemMemory.parse(files.read("/proc/meminfo"), path: files.path("/proc/meminfo"))
            let capacity = memory.totalBytes > minAvailableBytes ? memory.totalBytes - minAvailableBytes : 0
            readings.append(
                ParentReading(
                    usageBytes: memory.usedBytes, capacityBytes: capacity,
                    measure: "node (MemAvailable floor \(ByteSize.describe(minAvailableBytes)))"))
        }
        guard let nearest = readings.max(by: { $0.ratio < $1.ratio }) else {
            throw CgroupError(
                .unsupported,
                "the cgroup has no memory limit of its own and no --min-available was given: there is nothing to guard "
                    + "(a limit set above it is each service's to watch; give the agent that cgroup)",
                path: parent?.directory ?? "/proc/meminfo")
        }
        return nearest
    }
}

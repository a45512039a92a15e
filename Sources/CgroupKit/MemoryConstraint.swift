/// One limit that applies to a memory cgroup, with the usage it is measured against: the
/// cgroup's own limit, or an ancestor's (a systemd slice's `MemoryMax=`, a pod's limit) with that
/// ancestor's usage, which counts every sibling beside the cgroup.
///
/// The limit that binds is not the smallest but the one with the least headroom (limit minus
/// that cgroup's usage): a 256 MiB parent holding a sibling's 200 MiB leaves a child without a
/// limit of its own 56 MiB, whatever the child itself uses (a snapshot's `binding`).
public struct MemoryConstraint: Sendable, Hashable, Codable {
    /// The cgroup whose limit it is (its path inside the mount).
    public var cgroupPath: String
    /// That cgroup's usage in bytes (`memory.usage_in_bytes`, `memory.current`): for an ancestor,
    /// the usage of every cgroup below it. For a hidden limit (``isHidden``), the watched cgroup's
    /// own usage, the only part of the unknown usage that can be read. When inactive page cache is
    /// left out (``inactiveFileBytes`` is set), that much less: the working set, as the kubelet
    /// measures it.
    public var usageBytes: UInt64
    /// The inactive page cache left out of ``usageBytes`` (`memory.stat`'s `total_inactive_file`
    /// on cgroup v1, `inactive_file` on v2), or `nil` when it is counted (the default). These are
    /// file pages not used lately: at the limit the kernel reclaims them first, clean ones at once
    /// and dirty ones once written back.
    public var inactiveFileBytes: UInt64?
    /// The limit: its bytes, file and cgroup.
    public var limit: EffectiveLimit
    /// Whether the limit is set above the cgroup namespace's root (cgroup v1: `memory.stat`'s
    /// `hierarchical_memory_limit` is lower than every limit visible in the mount). Its cgroup
    /// cannot be read, so usage is the watched cgroup's own, a lower bound: siblings outside the
    /// namespace are not counted.
    public var isHidden: Bool

    /// Creates a constraint.
    ///
    /// - Parameters:
    ///   - cgroupPath: the cgroup whose limit it is, inside the mount.
    ///   - usageBytes: that cgroup's usage.
    ///   - limit: the limit.
    ///   - isHidden: whether the limit is set above the cgroup namespace's root.
    package init(cgroupPath: String, usageBytes: UInt64, limit: EffectiveLimit, isHidden: Bool = false) {
        self.init(cgroupPath: cgroupPath, usageBytes: usageBytes, limit: limit, isHidden: isHidden, inactiveFileBytes: nil)
    }

    /// Creates a constraint whose usage may leave inactive page cache out.
    ///
    /// - Parameters:
    ///   - cgroupPath: the cgroup whose limit it is, inside the mount.
    ///   - usageBytes: that cgroup's usage, less `inactiveFileBytes`.
    ///   - limit: the limit.
    ///   - isHidden: whether the limit is set above the cgroup namespace's root.
    ///   - inactiveFileBytes: the inactive page cache left out of `usageBytes`, or `nil` when it
    ///     is counted.
    package init(cgroupPath: String, usageBytes: UInt64, limit: EffectiveLimit, isHidden: Bool = false, inactiveFileBytes: UInt64?) {
        self.cgroupPath = cgroupPath
        self.usageBytes = usageBytes
        self.limit = limit
        self.isHidden = isHidden
        self.inactiveFileBytes = inactiveFileBytes
    }

    /// The node's floor as a limit, for a node agent that guards the node the way the kubelet's
    /// `memory.available` eviction threshold does: usage is the system's used memory
    /// (`MemTotal - MemAvailable`), the limit `MemTotal` less `floorBytes`. It names no cgroup:
    /// its ``cgroupPath`` is ``nodePath`` and its limit's file ``nodeFloorFile``.
    ///
    /// - Parameters:
    ///   - memory: the system's memory, from `/proc/meminfo`.
    ///   - floorBytes: the `MemAvailable` the node keeps.
    /// - Returns: the constraint.
    package static func nodeFloor(_ memory: SystemMemory, floorBytes: UInt64) -> MemoryConstraint {
        let capacity = memory.totalBytes > floorBytes ? memory.totalBytes - floorBytes : 0
        return MemoryConstraint(
            cgroupPath: nodePath, usageBytes: memory.usedBytes, limit: EffectiveLimit(bytes: capacity, file: nodeFloorFile, cgroupPath: nodePath))
    }

    /// The ``cgroupPath`` of ``nodeFloor(_:floorBytes:)``: no cgroup's (a cgroup's path begins with `/`).
    package static let nodePath = "node"
    /// The limit file of ``nodeFloor(_:floorBytes:)``.
    package static let nodeFloorFile = "MemAvailable floor"

    /// Whether it is the node's floor (``nodeFloor(_:floorBytes:)``), measured from `/proc/meminfo`.
    package var isNodeFloor: Bool { cgroupPath == Self.nodePath }

    /// What is left before the limit: limit minus usage (0 at or over it).
    public var headroomBytes: UInt64 { limit.bytes > usageBytes ? limit.bytes - usageBytes : 0 }

    /// Usage as a share of the limit.
    public var ratio: Double { limit.bytes == 0 ? 1 : Double(usageBytes) / Double(limit.bytes) }

    /// The constraint that binds: the least headroom; on a tie the first (the nearest to the
    /// watched cgroup, as `constraints(includingAncestors:)` orders them).
    ///
    /// - Parameter constraints: the constraints, nearest first.
    /// - Returns: the binding one, or `nil` when there is none.
    package static func binding(_ constraints: [MemoryConstraint]) -> MemoryConstraint? {
        var best: MemoryConstraint?
        for constraint in constraints where constraint.headroomBytes < best?.headroomBytes ?? .max { best = constraint }
        return best
    }
}

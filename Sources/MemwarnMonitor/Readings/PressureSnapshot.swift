public import CgroupKit

/// Everything the monitor knew at one moment: what a level event carries.
public struct PressureSnapshot: Sendable, Hashable {
    /// When it was taken: time since the Unix epoch (`CLOCK_REALTIME`).
    public var time: Duration
    /// The memory cgroup measured, or `nil` when no memory controller is mounted.
    public var cgroup: CgroupLocation?
    /// Usage in bytes, measured against ``limit``: the usage of the cgroup that sets the binding
    /// limit (``binding``: the cgroup's own, or a limited ancestor's, which counts its siblings),
    /// or the system's used memory (`MemTotal - MemAvailable`) when no limit applies.
    public var usageBytes: UInt64
    /// The binding limit: of the cgroup and its limited ancestors, the one with the least
    /// headroom (``binding``), or `nil` when none is set.
    public var limit: EffectiveLimit?
    /// Every limit that applies, nearest first, each with the usage it is measured against
    /// (CgroupKit's `CgroupMemoryReader.constraints(includingAncestors:)`), less those an agent
    /// coordinates (``coordinatedCgroups``). Empty when no limit applies.
    public var constraints: [MemoryConstraint] = []
    /// The watched cgroup's own usage (`nil` without a memory controller). It equals
    /// ``usageBytes`` when the cgroup's own limit binds.
    public var cgroupUsageBytes: UInt64?
    /// Ancestors whose limits a node agent coordinates for this process (`memwarn agent`):
    /// left out of ``constraints`` while its lease holds.
    public var coordinatedCgroups: [String] = []
    /// The system's memory, read when no cgroup limit applies (the fallback measure).
    public var system: SystemMemory?
    /// Memory pressure stalls: the cgroup2 group's `memory.pressure`, or the system's.
    public var pressure: PressureStall?
    /// Which PSI file ``pressure`` came from.
    public var pressureFile: String?

    /// Creates a snapshot.
    ///
    /// - Parameters:
    ///   - time: when it was taken, since the Unix epoch.
    ///   - cgroup: the memory cgroup measured, or `nil`.
    ///   - usageBytes: usage in bytes.
    ///   - limit: the effective limit, or `nil` when none is set.
    ///   - system: the system's memory, or `nil` when a cgroup limit applies.
    ///   - pressure: the pressure stalls read, or `nil` without PSI.
    ///   - pressureFile: the PSI file `pressure` came from.
    public init(
        time: Duration, cgroup: CgroupLocation?, usageBytes: UInt64, limit: EffectiveLimit?, system: SystemMemory?, pressure: PressureStall?,
        pressureFile: String?
    ) {
        self.time = time
        self.cgroup = cgroup
        self.usageBytes = usageBytes
        self.limit = limit
        self.system = system
        self.pressure = pressure
        self.pressureFile = pressureFile
    }

    /// The constraint whose limit binds (the least headroom), or `nil` when no limit applies.
    public var binding: MemoryConstraint? { MemoryConstraint.binding(constraints) }

    /// The bytes usage is measured against: the binding limit, else the system's total.
    public var capacityBytes: UInt64? { limit?.bytes ?? system?.totalBytes }

    /// Usage as a share of ``capacityBytes`` (0 when unknown).
    public var ratio: Double {
        guard let capacity = capacityBytes, capacity > 0 else { return 0 }
        return Double(usageBytes) / Double(capacity)
    }
}

package import CgroupKit
import MemwarnSystem

#if canImport(Glibc)
import Glibc
#endif

/// Reads one ``PressureSnapshot`` from the kernel's files for a cgroup layout.
package struct SnapshotSampler: Sendable {
    /// The cgroups read.
    package let layout: CgroupLayout
    /// Where the files are read.
    package let files: KernelFiles
    /// The PSI file read: the cgroup2 group's `memory.pressure` when it exists, else
    /// `/proc/pressure/memory`, else `nil` (a kernel without PSI).
    package let pressureFile: String?
    /// Whether the limits of the cgroup's ancestors count (the policy's `ancestor_limits`).
    package let includesAncestors: Bool
    /// Whether inactive page cache counts as usage (the policy's `inactive_page_cache`): when
    /// not, each usage read is less its cgroup's inactive file pages
    /// (``/CgroupKit/MemoryConstraint/inactiveFileBytes``).
    package let countsInactivePageCache: Bool
    /// The ancestors a node agent coordinates for this process, left out while their leases hold.
    let leases: AgentLeases?
    /// A node agent's floor on the node's `MemAvailable`: read as one more limit
    /// (``/CgroupKit/MemoryConstraint/nodeFloor(_:floorBytes:)``), `nil` for none.
    let nodeFloorBytes: UInt64?
    /// Whether a reading without any limit is an error (a node agent guards limits, never the
    /// whole machine's memory) rather than measured against the system's memory.
    let requiresLimit: Bool
    /// Which ancestors set a limit, from the latest walk up the mount (shared by every copy of
    /// this sampler: the monitor's event thread and its release thread both read).
    private let ancestors = Locked<(found: LimitedAncestors, at: ContinuousClock.Instant)?>(nil)
    /// The readings taken so far, by every copy of this sampler (one relaxed add a reading).
    private let reads = SharedCount()
    /// The release thread's measurements so far (`measure()`).
    private let measurements = SharedCount()

    /// How many readings every copy of this sampler has taken (``sample()``): the monitor's
    /// engine, one a wake, and a forecast's.
    var readCount: Int { reads.value }
    /// How many measurements of what a release freed the release thread took (`measure()`).
    var measurementCount: Int { measurements.value }

    /// How long a walk up the mount stands: an ancestor that gains or loses a limit is seen within
    /// it; a changed limit of one already known, at the next reading. The walk reads two files a
    /// level and `memory.stat`; a reading reads only the limits and usage it found.
    static let ancestorWalkInterval = Duration.seconds(1)

    /// A sampler for a layout.
    ///
    /// - Parameters:
    ///   - layout: the cgroups to read, as CgroupKit's `CgroupDiscovery` finds them.
    ///   - files: where the kernel's files are read; the real host by default.
    ///   - includesAncestors: whether limited ancestors count (their usage against their limits);
    ///     `false` reads the cgroup's own limit alone.
    package init(layout: CgroupLayout, files: KernelFiles = .host, includesAncestors: Bool = true) {
        self.init(layout: layout, files: files, includesAncestors: includesAncestors, leases: nil)
    }

    /// A sampler that reads as `policy` says (its `ancestor_limits` and `inactive_page_cache`).
    ///
    /// - Parameters:
    ///   - layout: the cgroups to read, as CgroupKit's `CgroupDiscovery` finds them.
    ///   - files: where the kernel's files are read; the real host by default.
    ///   - policy: the policy whose reading settings apply.
    package init(layout: CgroupLayout, files: KernelFiles = .host, policy: PressurePolicy) {
        self.init(
            layout: layout, files: files, includesAncestors: policy.countsAncestorLimits, countsInactivePageCache: policy.countsInactivePageCache,
            leases: nil)
    }

    /// A sampler with a node agent's leases, or a node agent's own: its parent's limit and the
    /// node's floor, and no fallback to the system's memory.
    package init(
        layout: CgroupLayout, files: KernelFiles, includesAncestors: Bool, countsInactivePageCache: Bool = true, leases: AgentLeases?,
        nodeFloorBytes: UInt64? = nil, requiresLimit: Bool = false
    ) {
        self.layout = layout
        self.files = files
        self.includesAncestors = includesAncestors
        self.countsInactivePageCache = countsInactivePageCache
        self.leases = leases
        self.nodeFloorBytes = nodeFloorBytes
        self.requiresLimit = requiresLimit
        if let unified = layout.unified, files.exists(unified.file("memory.pressure")) {
            pressureFile = unified.file("memory.pressure")
        } else if files.exists("/proc/pressure/memory") {
            pressureFile = "/proc/pressure/memory"
        } else {
            pressureFile = nil
        }
    }

    /// The memory cgroup's reader, when there is a memory controller.
    package var reader: CgroupMemoryReader? {
        layout.memory.map { CgroupMemoryReader(location: $0, files: files) }
    }

    /// Reads the cgroup's usage, every limit that applies with its usage (the binding one sets
    /// the snapshot's usage and limit), PSI, and (when no limit applies) `/proc/meminfo`.
    ///
    /// - Returns: the snapshot, stamped with the current time.
    /// - Throws: CgroupKit's `CgroupError` when a file is missing or malformed, including a
    ///   cgroup that was deleted (`.notFound`).
    package func sample() throws(CgroupError) -> PressureSnapshot {
        reads.add()
        return try read()
    }

    /// What the release thread reads to measure what a release (or the memory-warning
    /// responders before it) freed: the same files as a reading, counted apart, and never
    /// decided on (the reading that asked for the release carries its decision).
    package func measure() throws(CgroupError) -> PressureSnapshot {
        measurements.add()
        return try read()
    }

    private func read() throws(CgroupError) -> PressureSnapshot {
        var usage: UInt64 = 0
        var limit: EffectiveLimit?
        var constraints: [MemoryConstraint] = []
        var cgroupUsage: UInt64?
        var coordinated: [String] = []
        var watched: [MemoryConstraint] = []
        if let reader {
            constraints = try reader.constraints(
                along: includesAncestors ? limitedAncestors(reader) : nil, leavingOutInactiveFile: !countsInactivePageCache)
            // The own limit's reading, when there is one: the same number, not a second read.
            if let own = constraints.first(where: { $0.cgroupPath == reader.location.path && !$0.isHidden }) {
                cgroupUsage = own.usageBytes
            } else {
                cgroupUsage = try reader.measuredUsage(leavingOutInactiveFile: !countsInactivePageCache).bytes
            }
            watched = constraints
            if let leases {
                // The limits a lease leaves to the agent, unless its backstop counts them again.
                let left = leases.leftToAgent(constraints, excluding: reader.location.path)
                if !left.isEmpty {
                    coordinated = constraints.map(\.cgroupPath).filter(left.contains)
                    constraints.removeAll { left.contains($0.cgroupPath) && !$0.isHidden }
                }
            }
        }
        var system: SystemMemory?
        if let nodeFloorBytes {
            let meminfo = try SystemMemory.parse(files.read("/proc/meminfo"), path: files.path("/proc/meminfo"))
            system = meminfo
            constraints.append(.nodeFloor(meminfo, floorBytes: nodeFloorBytes))
            watched.append(constraints[constraints.count - 1])
        }
        if let binding = MemoryConstraint.binding(constraints) {
            usage = binding.usageBytes
            limit = binding.limit
        }
        if limit == nil, requiresLimit {
            throw CgroupError(
                .unsupported, "no memory limit of its own: nothing to guard (a limit set above it is each service's to watch)",
                path: layout.memory.map { files.path($0.directory) } ?? "/proc/meminfo")
        }
        if limit == nil {
            let meminfo = try SystemMemory.parse(files.read("/proc/meminfo"), path: files.path("/proc/meminfo"))
            system = meminfo
            usage = meminfo.usedBytes
        }
        let pressure = try pressureFile.map { (path) throws(CgroupError) in try PressureStall.parse(files.read(path), path: files.path(path)) }
        var snapshot = PressureSnapshot(
            time: Self.wallClock(), cgroup: layout.memory, usageBytes: usage, limit: limit, system: system,
            pressure: pressure, pressureFile: pressureFile)
        snapshot.constraints = constraints
        snapshot.cgroupUsageBytes = cgroupUsage
        snapshot.coordinatedCgroups = coordinated
        snapshot.constraintsWithCoordinated = watched
        return snapshot
    }

    /// The limited ancestors, walked afresh when the last walk is older than ``ancestorWalkInterval``.
    private func limitedAncestors(_ reader: CgroupMemoryReader) throws(CgroupError) -> LimitedAncestors {
        let now = ContinuousClock.now
        if let cached = ancestors.withLock({ $0 }), now - cached.at < Self.ancestorWalkInterval { return cached.found }
        let found = try reader.limitedAncestors()
        ancestors.withLock { $0 = (found, now) }
        return found
    }

    static func wallClock() -> Duration {
        KernelClock.sinceEpoch()
    }
}

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
    /// The counted limits: every limit that applies, nearest first, each with the usage it is
    /// measured against (the cgroup's own limit and each limited ancestor's), less
    /// those a node agent coordinates (``coordinatedCgroups``). What the monitor decides from:
    /// the level (``levelRatio``), the binding limit (``binding``, ``limit``, ``usageBytes``)
    /// and how much a release frees. Empty when no limit applies.
    public var constraints: [MemoryConstraint] = []
    /// The watched cgroup's own usage (`nil` without a memory controller). It equals
    /// ``usageBytes`` when the cgroup's own limit binds.
    public var cgroupUsageBytes: UInt64?
    /// Ancestors whose limits a node agent coordinates for this process (`memwarn agent`):
    /// left out of ``constraints`` while its lease holds, unless the agent leaves a crossing of
    /// that limit unanswered (see ``MemwarnMonitor/PressureMonitor`` on the backstop).
    public var coordinatedCgroups: [String] = []
    /// Every limit read, nearest first: ``constraints`` with the limits a node agent coordinates
    /// (``coordinatedCgroups``) kept in. Those count for neither the level nor a release; they are
    /// kept here so that the usage thresholds and the usage sampler follow their marks too, and the
    /// backstop of a coordinated limit is woken by the kernel as any other limit's crossing is.
    /// Filled by the monitor's sampler; empty in a snapshot made by hand. To plan a watch, read
    /// ``constraintsToWatch``, which falls back to ``constraints`` then.
    package var constraintsWithCoordinated: [MemoryConstraint] = []
    /// The system's memory, read when no cgroup limit applies (the fallback measure).
    public var system: SystemMemory?
    /// Memory pressure stalls: the cgroup2 group's `memory.pressure`, or the system's.
    public var pressure: PressureStall?
    /// Which PSI file ``pressure`` came from.
    package var pressureFile: String?

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
    package init(
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

    /// The limits to watch: those whose marks the usage thresholds (cgroup v1) and the usage
    /// sampler follow. ``constraintsWithCoordinated`` (the counted limits and the coordinated
    /// ones), or ``constraints`` in a snapshot made by hand, which has no coordinated limits.
    var constraintsToWatch: [MemoryConstraint] {
        constraintsWithCoordinated.isEmpty ? constraints : constraintsWithCoordinated
    }

    /// The share the level is decided from: the highest usage-to-limit share among the counted
    /// limits (``constraints``), each limit held to the same marks; ``ratio`` when it is higher
    /// or no limit applies. Never below ``ratio``.
    ///
    /// Compare this, not ``ratio``, with the policy's marks (`PressurePolicy.warningRatio`,
    /// `criticalRatio`, `recoveryRatio`): it says which level usage asks for. The binding limit is the one with
    /// the least headroom in bytes, not necessarily the one nearest its marks: a service at 50 %
    /// of its own 100 MiB under a 1 GiB parent at 85 % has less headroom under its own limit
    /// (which binds: ``ratio`` is 0.5), yet the parent, shared with siblings, is past its
    /// warning mark: ``levelRatio`` is 0.85 and the level is `warning`.
    public var levelRatio: Double {
        constraints.reduce(ratio) { max($0, $1.ratio) }
    }

    /// The bytes to free for every counted limit to be at or under the mark `depth` takes usage
    /// under (the largest excess among them); without limits, the system's used memory over that
    /// mark of its total. 0 when every one is under it.
    ///
    /// - Parameters:
    ///   - depth: the mark: the recovery mark, or just under the warning mark.
    ///   - policy: the marks.
    ///   - headroom: bytes each mark is lowered by (room for growth until the next release can
    ///     act), at most the mark itself.
    func excess(under depth: ReleaseDepth = .belowRecovery, policy: PressurePolicy, lessHeadroom headroom: Double = 0) -> Double {
        let measures = constraints.isEmpty ? capacityBytes.map { [(usageBytes, $0)] } ?? [] : constraints.map { ($0.usageBytes, $0.limit.bytes) }
        return measures.reduce(0.0) { largest, measure in
            let marks = LevelMarks(policy: policy, capacityBytes: measure.1)
            return max(largest, marks.excessBytes(usage: measure.0, overRatio: depth.ratio(at: marks), lessHeadroom: headroom))
        }
    }

    /// The bytes usage is measured against: the binding limit, else the system's total.
    public var capacityBytes: UInt64? { limit?.bytes ?? system?.totalBytes }

    /// How full the binding limit is: ``usageBytes`` as a share of ``capacityBytes`` — usage
    /// against the binding limit (``binding``: the least headroom in bytes), or the system's
    /// used memory against its total when no limit applies; 0 when neither is known.
    ///
    /// Use it to show or log how full the memory that would run out first is (the limit an OOM
    /// kill would come from). It is not what the level is decided from: another counted limit
    /// can be nearer its marks, and ``levelRatio`` takes it into account.
    public var ratio: Double {
        guard let capacity = capacityBytes, capacity > 0 else { return 0 }
        return Double(usageBytes) / Double(capacity)
    }
}

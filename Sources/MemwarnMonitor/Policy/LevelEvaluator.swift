import MemwarnRelease

/// Turns snapshots into levels: the marks, hysteresis and the hold before stepping down.
///
/// Escalation is immediate. A lower level is taken only after every evaluation for
/// ``PressurePolicy/holdTime`` has asked for it (or lower). Pure logic: no I/O, no clock of
/// its own, so it is tested without a kernel.
struct LevelEvaluator: Sendable {
    var policy: PressurePolicy
    /// Whether PSI's averages raise the level (``MonitorConfiguration/watchesPressureStall``).
    var countsPressureStall: Bool
    private(set) var level: MemoryPressureLevel = .normal
    private var lowerSince: ContinuousClock.Instant?

    init(policy: PressurePolicy, countsPressureStall: Bool = true, level: MemoryPressureLevel = .normal) {
        self.policy = policy
        self.countsPressureStall = countsPressureStall
        self.level = level
    }

    /// The level a snapshot asks for, given the current level (for hysteresis) and what the
    /// waking signal itself says (an OOM kill is critical whatever the usage); PSI's averages
    /// count only when `countsPressureStall`.
    static func candidate(
        for snapshot: PressureSnapshot, current: MemoryPressureLevel, hint: MemoryPressureLevel, policy: PressurePolicy,
        countsPressureStall: Bool
    ) -> MemoryPressureLevel {
        var wanted = hint
        if snapshot.capacityBytes != nil {
            let ratio = snapshot.levelRatio  // every counted limit at its own marks: the highest level
            let fromUsage: MemoryPressureLevel =
                if ratio >= policy.criticalRatio { .critical } else if ratio >= policy.warningRatio { .warning } else if ratio >= policy.recoveryRatio {
                    current > .normal ? .warning : .normal
                } else { .normal }
            wanted = max(wanted, fromUsage)
        }
        if countsPressureStall, let pressure = snapshot.pressure {
            if pressure.some.avg10 >= policy.psiSomeWarningPercent { wanted = max(wanted, .warning) }
            if let full = pressure.full, full.avg10 >= policy.psiFullCriticalPercent { wanted = max(wanted, .critical) }
        }
        return wanted
    }

    /// The outcome of one evaluation.
    struct Outcome: Equatable {
        /// The new level, when it changed.
        var change: MemoryPressureLevel?
        /// When to evaluate again to complete a pending step down.
        var stepDownAt: ContinuousClock.Instant?
    }

    /// Evaluates a snapshot at `now`.
    mutating func evaluate(_ snapshot: PressureSnapshot, hint: MemoryPressureLevel, now: ContinuousClock.Instant) -> Outcome {
        let wanted = Self.candidate(for: snapshot, current: level, hint: hint, policy: policy, countsPressureStall: countsPressureStall)
        if wanted >= level {
            lowerSince = nil
            guard wanted > level else { return Outcome() }
            level = wanted
            return Outcome(change: wanted)
        }
        let since = lowerSince ?? now
        lowerSince = since
        guard now - since >= policy.holdTime else { return Outcome(stepDownAt: since + policy.holdTime) }
        lowerSince = nil
        level = wanted
        return Outcome(change: wanted)
    }
}

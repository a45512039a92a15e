import MemwarnRelease

/// The monitor's level, decided once a reading: the marks and hysteresis, the forecast's gate,
/// the hold before stepping down, when to read again while raised, and the level a release
/// should be made at.
///
/// Escalation is immediate. A lower level is taken only after every reading for
/// ``PressurePolicy/holdTime`` has asked for it (or lower). Pure logic: no I/O and no clock of
/// its own (every step is given its instant), so it is tested without a kernel and without
/// waiting. The engine steps it on its loop thread; the ``Decision`` travels with the reading to
/// the release thread, which acts on it and does not decide again.
struct LevelMachine: Sendable {
    let policy: PressurePolicy
    /// Whether PSI's averages raise the level (``MonitorConfiguration/watchesPressureStall``).
    let countsPressureStall: Bool
    private(set) var level: MemoryPressureLevel
    /// Counts every decision, one a reading, when given (the tests compare it with the
    /// readings; a monitor counts none).
    let decisions: SharedCount?
    /// A lower level asked for since `since`, first seen by `cause` (the step down's signal).
    private var stepDown: (since: ContinuousClock.Instant, cause: PressureSignal)?

    init(policy: PressurePolicy, countsPressureStall: Bool = true, level: MemoryPressureLevel = .normal, decisions: SharedCount? = nil) {
        self.policy = policy
        self.decisions = decisions
        self.countsPressureStall = countsPressureStall
        self.level = level
    }

    /// What one reading decided.
    struct Decision: Sendable, Equatable {
        /// The level after the reading.
        var level: MemoryPressureLevel
        /// The level before it (`nil` for a monitor's first reading).
        var previous: MemoryPressureLevel?
        /// The signal the level is owed to: the reading's, the forecast's when it raised the
        /// level, or, for a step down, the signal that first saw the lower level.
        var cause: PressureSignal
        /// The level the reading rose to, when it rose (never for a monitor's first reading).
        var rise: MemoryPressureLevel? { previous.flatMap { level > $0 ? level : nil } }
        /// The level to release at, when the reading asks for a release: a rise's level, or, while
        /// the level stays raised, whenever usage is back at the warning mark, the level usage
        /// asks for without hysteresis (at least `.warning`, never above the level).
        var releaseLevel: MemoryPressureLevel?
        /// Whether the forecast raised the level (the growth tracker counts the warning).
        var forecastRaised: Bool { rise != nil && cause == .forecast }
        /// When the level wants another reading, and the signal it is owed to: the end of a
        /// pending step down's hold, or, while raised, the recheck interval from now. `nil` at
        /// `.normal` with nothing pending.
        var nextReading: NextReading?
    }

    /// A reading the level itself asks for.
    struct NextReading: Sendable, Equatable {
        var at: ContinuousClock.Instant
        var cause: PressureSignal
    }

    /// Decides a reading taken at `now`: `hint` is the level the waking signal asks for by itself
    /// (``WakeHint/level``: an OOM kill is critical whatever the usage; `.normal` for a signal that
    /// only asks for a reading, ``WakeHint/readNow``), `source` that signal; the forecast raises
    /// `.warning` where nothing else asks for it.
    mutating func step(
        _ snapshot: PressureSnapshot, hint: MemoryPressureLevel, source: PressureSignal, forecast: PressureForecast?,
        now: ContinuousClock.Instant
    ) -> Decision {
        decide(snapshot, hint: hint, source: source, forecast: forecast, previous: level, now: now)
    }

    /// Decides the first reading of a monitor (`carried == nil`: no rise, whatever the level), or
    /// of a session that replaces one at `carried` (a policy applied while running: the level
    /// carries over, and a step down it asks for holds from now, at the new marks). The forecast
    /// does not count yet (it has one reading).
    mutating func start(_ snapshot: PressureSnapshot, carried: MemoryPressureLevel?, now: ContinuousClock.Instant) -> Decision {
        // `.normal`: no signal asks for a level here (`WakeHint.readNow`); the reading alone decides.
        decide(snapshot, hint: .normal, source: carried == nil ? .initial : .policyChange, forecast: nil, previous: carried, now: now)
    }

    private mutating func decide(
        _ snapshot: PressureSnapshot, hint: MemoryPressureLevel, source: PressureSignal, forecast: PressureForecast?,
        previous: MemoryPressureLevel?, now: ContinuousClock.Instant
    ) -> Decision {
        decisions?.add()
        let asked = Self.asked(by: snapshot, policy: policy, countsPressureStall: countsPressureStall)
        var wanted = max(hint, asked.level)
        if asked.inRecoveryBand && level > .normal { wanted = max(wanted, .warning) }  // hysteresis
        var source = source
        if wanted < .warning, forecast != nil, ForecastRule.warns(forecast, snapshot: snapshot, policy: policy) {
            wanted = .warning
            source = .forecast
        }
        var cause = source
        if wanted >= level {
            stepDown = nil
            level = wanted
        } else {
            let pending = stepDown ?? (now, source)
            stepDown = pending
            if now - pending.since >= policy.holdTime {
                stepDown = nil
                level = wanted
                cause = pending.cause
            }
        }
        var decision = Decision(level: level, previous: previous, cause: cause)
        if let rise = decision.rise {
            decision.releaseLevel = rise
        } else if level > .normal, snapshot.capacityBytes != nil, LevelMarks.asked(byRatio: snapshot.levelRatio, policy: policy).level >= .warning {
            decision.releaseLevel = min(level, max(.warning, asked.level))
        }
        if let stepDown {
            decision.nextReading = NextReading(at: stepDown.since + policy.holdTime, cause: stepDown.cause)
        } else if level > .normal {
            decision.nextReading = NextReading(at: now + policy.recheckInterval, cause: .recheck)
        }
        return decision
    }

    /// What a snapshot asks for by itself, without hysteresis: the highest level of every
    /// counted limit at its own marks, and PSI's averages when they count; and whether usage
    /// stands between the recovery and the warning marks (where a raised level holds).
    static func asked(
        by snapshot: PressureSnapshot, policy: PressurePolicy, countsPressureStall: Bool
    ) -> (level: MemoryPressureLevel, inRecoveryBand: Bool) {
        var level = MemoryPressureLevel.normal
        var inRecoveryBand = false
        if snapshot.capacityBytes != nil { (level, inRecoveryBand) = LevelMarks.asked(byRatio: snapshot.levelRatio, policy: policy) }
        if countsPressureStall, let pressure = snapshot.pressure {
            if pressure.some.avg10 >= policy.psiSomeWarningPercent { level = max(level, .warning) }
            if let full = pressure.full, full.avg10 >= policy.psiFullCriticalPercent { level = max(level, .critical) }
        }
        return (level, inRecoveryBand)
    }
}

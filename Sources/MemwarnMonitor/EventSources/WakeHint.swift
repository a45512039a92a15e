import MemwarnRelease

/// What a signal that wakes the monitor says by itself, before the reading it wakes it for:
/// either only "take a reading now" (``readNow``), or a level it asks for whatever usage says (an
/// OOM kill is ``critical`` at any usage). The reading's level is the higher of ``level`` and
/// what the reading itself asks for; a stronger hint wins where several wakes are merged into
/// one reading.
package enum WakeHint: Sendable, Hashable, Comparable {
    /// Take a reading now, and let it alone decide: something may have changed (a usage
    /// crossing, a limit written, a poll, a recheck, a reading the release loop asked for), and
    /// the signal asks for no level of its own.
    case readNow
    /// The signal asks for `.warning` at least (PSI's `some` stalls, v2 `memory.high` hit, a v1
    /// `medium` pressure level, systemd's pressure watch).
    case warning
    /// The signal asks for `.critical` (an OOM kill, v2 `memory.max` hit, PSI's `full` stalls,
    /// a v1 `critical` pressure level).
    case critical

    /// The hint of a signal that asks for `level` at least: ``readNow`` for `.normal`.
    init(atLeast level: MemoryPressureLevel) {
        switch level {
        case .normal: self = .readNow
        case .warning: self = .warning
        case .critical: self = .critical
        }
    }

    /// The level the signal asks for by itself: `.normal` (none) for ``readNow``.
    var level: MemoryPressureLevel {
        switch self {
        case .readNow: .normal
        case .warning: .warning
        case .critical: .critical
        }
    }
}

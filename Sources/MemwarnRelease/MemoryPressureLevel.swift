/// How tight memory is, as iOS's memory-pressure source reports it.
public enum MemoryPressureLevel: String, Sendable, Hashable, Codable, Comparable, CaseIterable, CustomStringConvertible {
    /// Usage is below the recovery mark, or has been below the warning mark for the hold time.
    case normal
    /// Usage is at or above the warning mark, or memory stalls are noticeable: drop caches.
    case warning
    /// Usage is at or above the critical mark, stalls are severe, or the OOM killer acted:
    /// release everything that can be rebuilt, terminate suspended work.
    case critical

    private var rank: Int {
        switch self {
        case .normal: 0
        case .warning: 1
        case .critical: 2
        }
    }

    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rank < rhs.rank }

    public var description: String { rawValue }
}

/// The signal that woke the monitor and produced a level.
///
/// Three are public, for a service to tell apart: ``initial``, ``forecast`` and ``request``. The
/// others say which kernel event or reading it was, by ``name``: `usage-threshold`,
/// `pressure-level`, `oom`, `memory-events`, `psi-trigger`, `systemd-memory-pressure`, `poll`,
/// `usage-sample`, `recheck`, `agent-lease`, `limit-change` and `policy-change`
/// (the article "What the monitor listens to" says when each comes).
public struct PressureSignal: Sendable, Hashable, CustomStringConvertible {
    /// The signal's name, as printed by `memwarn watch --json` (`source`).
    public let name: String
    /// Whether the kernel delivered it as an event (eventfd, PSI trigger, inotify) rather
    /// than memwarn finding it by sampling.
    public let isEventDriven: Bool

    private init(_ name: String, eventDriven: Bool) {
        self.name = name
        self.isEventDriven = eventDriven
    }

    /// The first reading when the monitor starts.
    public static let initial = PressureSignal("initial", eventDriven: false)
    /// The first reading at a policy applied while the monitor runs
    /// (`PressureMonitor.apply(policy:)`): the marks moved.
    package static let policyChange = PressureSignal("policy-change", eventDriven: false)
    /// A cgroup v1 usage threshold (`memory.usage_in_bytes` via `cgroup.event_control`).
    package static let usageThreshold = PressureSignal("usage-threshold", eventDriven: true)
    /// A cgroup v1 `memory.pressure_level` notification.
    package static let pressureLevel = PressureSignal("pressure-level", eventDriven: true)
    /// An OOM notification (v1 `memory.oom_control`) or a new `oom`/`oom_kill` count (v2).
    package static let oom = PressureSignal("oom", eventDriven: true)
    /// A change of cgroup v2 `memory.events`.
    package static let memoryEvents = PressureSignal("memory-events", eventDriven: true)
    /// A PSI trigger fired.
    package static let psiTrigger = PressureSignal("psi-trigger", eventDriven: true)
    /// systemd's `MEMORY_PRESSURE_WATCH` fired.
    package static let systemd = PressureSignal("systemd-memory-pressure", eventDriven: true)
    /// A periodic reading: where usage is sampled, the full reading taken once every
    /// `PressurePolicy.pollInterval` (every reading when adaptive sampling is off); also PSI's
    /// sampling fallback where a trigger was refused.
    package static let poll = PressureSignal("poll", eventDriven: false)
    /// Adaptive sampling found usage across a mark (or one of the usage thresholds every 5 % of
    /// the limit from half of it up): where the kernel sends no usage events (cgroup v2, a cgroup
    /// v1 monitor not run as root, no limit), and on cgroup v1 inside a guard band below a mark,
    /// for a crossing the kernel did not report.
    package static let usageSample = PressureSignal("usage-sample", eventDriven: false)
    /// A re-check: a reading the monitor asks for itself, with no kernel signal behind it, to
    /// read usage again. While the level is raised, every `PressurePolicy.recheckInterval`, to
    /// find the way down after the hold time; and after a release, when the reading that reached
    /// the release thread was read before that release ended (its usage is from before it).
    package static let recheck = PressureSignal("recheck", eventDriven: false)
    /// The growth forecast: usage, growing as measured, would reach the critical mark within
    /// `PressurePolicy.forecastHorizon`. Raises `.warning` before the warning mark is crossed.
    public static let forecast = PressureSignal("forecast", eventDriven: false)
    /// A node agent (`memwarn agent`) began coordinating an ancestor's limit, or its lease ran
    /// out: the monitor reads again with that limit left out, or counted again.
    package static let agentLease = PressureSignal("agent-lease", eventDriven: false)
    /// A memory limit of the cgroup or of an ancestor was written (`memory.limit_in_bytes`,
    /// `memory.max`, `memory.high`, watched with inotify): the monitor reads again, and the
    /// marks — and on cgroup v1 as root, the usage thresholds — follow the new limit.
    package static let limitChange = PressureSignal("limit-change", eventDriven: true)
    /// A request from the application or the CLI.
    public static let request = PressureSignal("request", eventDriven: false)

    public var description: String { name }
}

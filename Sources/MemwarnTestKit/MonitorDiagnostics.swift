public import MemwarnMonitor

/// What a test or a benchmark reads of a running monitor that a service has no use for: how usage
/// reaches it, when its usage thresholds were registered, and what it watches. (An operator reads
/// the same in `memwarn status`; the monitor's own figures are `package`.)
extension PressureMonitor {
    /// How usage reaches the monitor now: `thresholds`, `adaptive-sampling` or `polling`; `nil`
    /// before it is armed.
    public var usageWatchName: String? { usageWatch?.name }

    /// How long after the monitor was made its cgroup v1 usage thresholds were registered, once
    /// they are; `nil` before, or where it registers none.
    public var thresholdsRegisteredAfter: Duration? { arming?.thresholdsRegisteredAfter }

    /// The usage thresholds still to register behind the initializer (cgroup v1 as root).
    public var pendingThresholds: Int { arming?.pendingThresholds ?? 0 }

    /// The sources the monitor registered, as `memwarn status --pid` lists them.
    public var sourcesWatched: [String] { watchedSources }
}

package import MemwarnMonitor
package import MemwarnRelease
package import MemwarnSystem

/// What a control endpoint answers to `status`: the monitor's latest reading and the
/// coordinator's consumers.
package struct ControlStatus: Sendable, Hashable {
    /// One registered consumer.
    package struct Consumer: Sendable, Hashable {
        /// The consumer's name.
        package var name: String
        /// Its tier's name, such as `caches`.
        package var tier: String
        /// The bytes it holds now.
        package var footprintBytes: Int
        /// The part of ``footprintBytes`` it says is in use (``/MemwarnRelease/MemoryConsumer/inUseBytes``);
        /// `nil` when it does not say (and from an endpoint that predates it).
        package var inUseBytes: Int?
    }

    /// The process's pid.
    package var pid: Int32
    /// The monitor's level (`normal` before its first reading).
    package var level: MemoryPressureLevel
    /// The latest usage, or `nil` before the first reading.
    package var usageBytes: UInt64?
    /// The effective limit, or `nil` when none applies or before the first reading.
    package var limitBytes: UInt64?
    /// The memory cgroup watched, or `nil` when unknown.
    package var cgroupPath: String?
    /// The coordinator's live consumers, in release order: by tier, the largest first.
    package var consumers: [Consumer]
    /// What the coordinator has released so far (an endpoint that predates it answers none).
    package var released = ReleaseTotals()
    /// Whether the monitor finds memory exhausted now (``/MemwarnMonitor/PressureMonitor/isMemoryExhausted``).
    package var isMemoryExhausted = false
    /// The monitor's forecast warnings so far and how they turned out.
    package var forecasts = ForecastTally()
    /// The process's resident memory and heap in use, when it could read them.
    package var process: ProcessMemory?
    /// The ancestors whose limits a node agent (`memwarn agent`) coordinates for the process
    /// now, each under a lease the agent renews (its monitor leaves those limits to the agent),
    /// sorted; empty when none does (and from an endpoint that predates it).
    package var coordinatedCgroups: [String] = []
    /// What the process's monitor listens to, one line a source, as
    /// `watchedSources` lists them: systemd's
    /// `MEMORY_PRESSURE_WATCH` among them (`systemd PATH`) when the service manager set it, or
    /// the reason it is not watched. Empty without a monitor, in the summary form, and from an
    /// endpoint that predates it.
    package var monitorSources: [String] = []
}

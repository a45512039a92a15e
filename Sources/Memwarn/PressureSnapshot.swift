public import CgroupKit

/// Everything the monitor knew at one moment: what a level event carries.
public struct PressureSnapshot: Sendable, Hashable {
    /// When it was taken: time since the Unix epoch (`CLOCK_REALTIME`).
    public var time: Duration
    /// The memory cgroup measured, or `nil` when no memory controller is mounted.
    public var cgroup: CgroupLocation?
    /// Usage in bytes: the cgroup's (`memory.usage_in_bytes`, `memory.current`), or the
    /// system's used memory (`MemTotal - MemAvailable`) when no limit applies.
    public var usageBytes: UInt64
    /// The effective limit (lowest of the cgroup and its ancestors), or `nil` when none is set.
    public var limit: EffectiveLimit?
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
    public init(time: Duration, cgroup: CgroupLocation?, usageBytes: UInt64, limit: EffectiveLimit?, system: SystemMemory?, pressure: PressureStall?, pressureFile: String?) {
        self.time = time
        self.cgroup = cgroup
        self.usageBytes = usageBytes
        self.limit = limit
        self.system = system
        self.pressure = pressure
        self.pressureFile = pressureFile
    }

    /// The bytes usage is measured against: the effective limit, else the system's total.
    public var capacityBytes: UInt64? { limit?.bytes ?? system?.totalBytes }

    /// Usage as a share of ``capacityBytes`` (0 when unknown).
    public var ratio: Double {
        guard let capacity = capacityBytes, capacity > 0 else { return 0 }
        return Double(usageBytes) / Double(capacity)
    }
}

/// A change of the memory-pressure level (or the first reading, with no previous level).
public struct LevelEvent: Sendable, Hashable {
    /// The new level.
    public var level: MemoryPressureLevel
    /// The level before; `nil` for the first reading.
    public var previous: MemoryPressureLevel?
    /// The signal that produced it.
    public var source: PressureSignal
    /// What the monitor read.
    public var snapshot: PressureSnapshot
    /// When memory runs out if it keeps growing as measured, or `nil` when usage is not
    /// clearly growing. A rise with source ``PressureSignal/forecast`` always carries one.
    public var forecast: PressureForecast?

    /// Creates an event.
    ///
    /// - Parameters:
    ///   - level: the new level.
    ///   - previous: the level before; `nil` for the first reading.
    ///   - source: the signal that produced it.
    ///   - snapshot: what the monitor read.
    ///   - forecast: the forecast, or `nil` when usage is not clearly growing.
    public init(level: MemoryPressureLevel, previous: MemoryPressureLevel?, source: PressureSignal, snapshot: PressureSnapshot,
                forecast: PressureForecast? = nil) {
        self.level = level
        self.previous = previous
        self.source = source
        self.snapshot = snapshot
        self.forecast = forecast
    }
}

/// One reading of the monitor's, for its release loop: every sample, not only level changes.
struct MonitorReading: Sendable {
    /// The level after the reading, with its snapshot and forecast (`previous == level` when the
    /// level did not change).
    var event: LevelEvent
    /// The level the reading rose to, when it was a rise.
    var rise: MemoryPressureLevel?
    /// The sustained growth rate (``GrowthEstimate/sustainedBytesPerSecond``), 0 when none.
    var growthBytesPerSecond: Double
    /// The forecast warnings so far.
    var tally: ForecastTally
    /// How long the next detection of a usage change can take: ``eventDrivenDetection`` where
    /// the kernel reports usage crossings, the poll interval where usage is polled.
    var detectionBound: Duration

    /// The longest a detection takes where the kernel reports usage crossings (measured p99
    /// 4.4 ms on cgroup v1, see the README's latency table), rounded up.
    static let eventDrivenDetection = Duration.milliseconds(10)
}

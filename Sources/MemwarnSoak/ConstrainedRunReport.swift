public import MemwarnSystem

/// What `memwarn run` reports when its command has ended.
public struct ConstrainedRunReport: Sendable, Codable {
    /// One level change the monitor saw, seconds after the start.
    public struct LevelChange: Sendable, Hashable, Codable {
        public var seconds: Double
        public var level: String
        public var usageBytes: UInt64
    }

    public var command: [String]
    /// The cgroup it ran in (removed afterwards: see ``cgroupRemoved``).
    public var cgroup: String
    public var memoryMaxBytes: UInt64
    public var memoryHighBytes: UInt64?
    /// How the command ended.
    public var exit: ProcessExit
    /// `exit.code`: the status, or 128 + the signal; `memwarn run` exits with it.
    public var exitCode: Int32
    /// OOM kills in the cgroup (v1 `memory.oom_control`, v2 `memory.events`).
    public var oomKills: UInt64
    /// The kernel's recorded peak usage, when it keeps one.
    public var peakUsageBytes: UInt64?
    /// Level changes by level: how many times the monitor entered each.
    public var warnings: [String: Int]
    public var levelChanges: [LevelChange]
    public var durationSeconds: Double
    /// Whether the cgroup was removed (it always should be; `false` comes with an error in the log).
    public var cgroupRemoved: Bool
    /// Usage readings, when sampling was asked for (the soak's plot).
    public var samples: [SoakSample]
    /// Why the run's monitor stopped before the command ended, if it did: from then on the
    /// command ran unmonitored (its levels are missing from ``levelChanges``).
    public var monitorError: String?

    /// A run still under way, as far as it went (the soak's plot, written as it goes).
    static func inProgress(
        command: [String], cgroup: String, memoryMaxBytes: UInt64, seconds: Double, samples: [SoakSample],
        levelChanges: [LevelChange]
    ) -> ConstrainedRunReport {
        var warnings: [String: Int] = [:]
        for change in levelChanges where change.level != "normal" { warnings[change.level, default: 0] += 1 }
        return ConstrainedRunReport(
            command: command, cgroup: cgroup, memoryMaxBytes: memoryMaxBytes, memoryHighBytes: nil, exit: ProcessExit(),
            exitCode: 0, oomKills: 0, peakUsageBytes: samples.map(\.usageBytes).max(), warnings: warnings,
            levelChanges: levelChanges, durationSeconds: seconds, cgroupRemoved: false, samples: samples, monitorError: nil)
    }
}

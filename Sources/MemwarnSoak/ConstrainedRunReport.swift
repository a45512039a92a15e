package import MemwarnSystem

/// What `memwarn run` reports when its command has ended.
package struct ConstrainedRunReport: Sendable, Codable {
    /// One level change the monitor saw, seconds after the start.
    package struct LevelChange: Sendable, Hashable, Codable {
        package var seconds: Double
        package var level: String
        package var usageBytes: UInt64
    }

    package var command: [String]
    /// The cgroup it ran in (removed afterwards: see ``cgroupRemoved``).
    package var cgroup: String
    package var memoryMaxBytes: UInt64
    package var memoryHighBytes: UInt64?
    /// How the command ended.
    package var exit: ProcessExit
    /// `exit.code`: the status, or 128 + the signal; `memwarn run` exits with it.
    package var exitCode: Int32
    /// OOM kills in the cgroup (v1 `memory.oom_control`, v2 `memory.events`).
    package var oomKills: UInt64
    /// The kernel's recorded peak usage, when it keeps one.
    package var peakUsageBytes: UInt64?
    /// Level changes by level: how many times the monitor entered each.
    package var warnings: [String: Int]
    package var levelChanges: [LevelChange]
    package var durationSeconds: Double
    /// Whether the cgroup was removed (it always should be; `false` comes with an error in the log).
    package var cgroupRemoved: Bool
    /// Usage readings, when sampling was asked for (the soak's plot).
    package var samples: [SoakSample]
    /// Why the run's monitor stopped before the command ended, if it did: from then on the
    /// command ran unmonitored (its levels are missing from ``levelChanges``).
    package var monitorError: String?

    /// A run still under way, as far as it went (the soak's plot, written as it goes).
    static func inProgress(
        command: [String], cgroup: String, memoryMaxBytes: UInt64, seconds: Double, recorded recorder: RunRecorder
    ) -> ConstrainedRunReport {
        let (samples, levelChanges) = (recorder.samples, recorder.levelChanges)
        return ConstrainedRunReport(
            command: command, cgroup: cgroup, memoryMaxBytes: memoryMaxBytes, memoryHighBytes: nil, exit: ProcessExit(),
            exitCode: 0, oomKills: 0, peakUsageBytes: samples.map(\.usageBytes).max(), warnings: warnings(in: levelChanges),
            levelChanges: levelChanges, durationSeconds: seconds, cgroupRemoved: false, samples: samples, monitorError: nil)
    }

    /// Level changes by level: how many times each above normal was entered.
    static func warnings(in levelChanges: [LevelChange]) -> [String: Int] {
        var warnings: [String: Int] = [:]
        for change in levelChanges where change.level != "normal" { warnings[change.level, default: 0] += 1 }
        return warnings
    }
}

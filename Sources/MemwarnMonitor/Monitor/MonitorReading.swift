package import MemwarnRelease

/// One reading of the monitor's, for its release loop: every sample, not only level changes.
package struct MonitorReading: Sendable {
    /// The level after the reading, with its snapshot and forecast (`previous == level` when the
    /// level did not change).
    package var event: LevelEvent
    /// The level the reading rose to, when it was a rise.
    package var rise: MemoryPressureLevel?
    /// The level to release at, as the ``LevelMachine`` decided it (``LevelMachine/Decision/releaseLevel``):
    /// the release thread acts on it and does not decide again.
    package var releaseLevel: MemoryPressureLevel?
    /// The sustained growth rate (``GrowthEstimate/sustainedBytesPerSecond``), 0 when none.
    package var growthBytesPerSecond: Double
    /// The forecast warnings so far.
    package var tally: ForecastTally
    /// When the engine began to read it (monotonic: the snapshot's own time is the wall clock,
    /// which can step), to tell how old it is when the release thread takes it, and whether its
    /// read began before the last release ended.
    package var readAt: ContinuousClock.Instant
    /// How long the next detection of a usage change can take: ``eventDrivenDetection`` where
    /// the kernel reports usage crossings, the sampler's current wait where usage is sampled.
    package var detectionBound: Duration

    /// The longest a detection takes where the kernel reports usage crossings (measured p99
    /// 1.5 ms on cgroup v1, see the README's latency table), rounded up. A crossing it leaves
    /// unreported is found by guard-band sampling within 105 ms; it is by growth that stopped
    /// within 128 pages a CPU past the mark, so there is no growth to size a release for then.
    /// Nor is there for a threshold crossed again within ``ThresholdPlanner/quietAfterFiring`` of
    /// its last report (read up to 100 ms late): usage going back and forth across one threshold.
    package static let eventDrivenDetection = Duration.milliseconds(10)
}

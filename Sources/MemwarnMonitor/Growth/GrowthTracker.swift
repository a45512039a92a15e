import MemwarnSystem

/// The monitor's view of growth: the estimate fed with every reading (the bytes memwarn's own
/// releases freed added back), the forecast it gives, and the tally of forecast warnings,
/// each settled as confirmed or false.
struct GrowthTracker {
    private let policy: PressurePolicy
    private var estimator: GrowthEstimator
    private var lastCapacity: UInt64?
    /// The cgroup whose usage was measured last (the binding limit's): another one's usage is
    /// another series.
    private var lastMeasured: String?
    /// How the forecast warnings turned out so far.
    private(set) var tally = ForecastTally()
    /// A forecast warning waiting to be settled: the ledger's bytes when it was raised, and its
    /// deadline (monotonic seconds).
    private var pending: (releasedBytes: UInt64, deadline: Double)?

    init(policy: PressurePolicy) {
        self.policy = policy
        estimator = GrowthEstimator(window: policy.growthWindow)
    }

    /// The sustained growth rate, 0 when usage is not clearly growing.
    var bytesPerSecond: Double { estimator.estimate?.sustainedBytesPerSecond ?? 0 }

    /// Feeds a reading to the estimate — unless a release was under way, or ended, while the
    /// files were read (the ledger changed) — settles a pending forecast warning, and returns
    /// the forecast.
    ///
    /// - Parameters:
    ///   - snapshot: the reading.
    ///   - ledgerBefore: the ledger as it was before the files were read.
    ///   - ledgerAfter: the ledger now.
    ///   - now: when the reading was taken (monotonic).
    mutating func observe(
        _ snapshot: PressureSnapshot, ledgerBefore: ReleaseLedger.Entry, ledgerAfter: ReleaseLedger.Entry, now instant: ContinuousClock.Instant
    ) -> PressureForecast? {
        let now = instant.secondsSinceStart
        let measured = snapshot.binding?.cgroupPath
        if snapshot.capacityBytes != lastCapacity || measured != lastMeasured {
            estimator.reset()
            lastCapacity = snapshot.capacityBytes
            lastMeasured = measured
        }
        let compensated = Double(snapshot.usageBytes) + Double(ledgerAfter.releasedBytes)
        if let capacity = snapshot.capacityBytes, ledgerBefore == ledgerAfter, !ledgerAfter.inFlight {
            estimator.add(seconds: now, bytes: compensated, capacityBytes: Double(capacity))
        }
        if let pending, let capacity = snapshot.capacityBytes {
            let grown = Double(snapshot.usageBytes) + Double(ledgerAfter.releasedBytes &- pending.releasedBytes)
            if grown >= Double(LevelMarks(policy: policy, capacityBytes: capacity).warningBytes) {
                tally.confirmed += 1
                self.pending = nil
            } else if now >= pending.deadline {
                tally.falseAlarms += 1
                self.pending = nil
            }
        }
        return ForecastRule.forecast(estimator.estimate, snapshot: snapshot, policy: policy)
    }

    /// Counts a forecast warning just raised and sets the deadline by which its growth must show.
    mutating func noteForecastWarning(_ snapshot: PressureSnapshot, forecast: PressureForecast?, releasedBytes: UInt64, now: ContinuousClock.Instant) {
        if pending != nil { tally.falseAlarms += 1 }  // superseded before it was settled
        tally.raised += 1
        guard let forecast, let capacity = snapshot.capacityBytes else { return }
        let warning = LevelMarks(policy: policy, capacityBytes: capacity).warningBytes
        let toWarning = max(0, Double(warning) - Double(snapshot.usageBytes)) / forecast.growth.bytesPerSecond
        pending = (releasedBytes, now.secondsSinceStart + 2 * toWarning + 1)
    }
}

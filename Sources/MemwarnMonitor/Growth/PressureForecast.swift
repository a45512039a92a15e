/// When memory will run out if it keeps growing as measured.
///
/// Carried by every ``LevelEvent`` when usage is growing clearly (``GrowthEstimate/confidence``
/// of 2 or more over at least three readings), printed by `memwarn status --json` and
/// `memwarn watch --json` (`growthBytesPerSecond`, `secondsToCritical`, `secondsToLimit`),
/// and reported as metrics.
public struct PressureForecast: Sendable, Hashable {
    /// The measured growth.
    public var growth: GrowthEstimate
    /// Seconds until usage reaches the critical mark (0 when it already has).
    public var secondsToCritical: Double
    /// Seconds until usage reaches the effective limit (0 when it already has).
    public var secondsToLimit: Double

    /// Creates a forecast.
    ///
    /// - Parameters:
    ///   - growth: the measured growth.
    ///   - secondsToCritical: seconds until usage reaches the critical mark.
    ///   - secondsToLimit: seconds until usage reaches the effective limit.
    package init(growth: GrowthEstimate, secondsToCritical: Double, secondsToLimit: Double) {
        self.growth = growth
        self.secondsToCritical = secondsToCritical
        self.secondsToLimit = secondsToLimit
    }
}

/// When a forecast is reported, and when it is trusted enough to raise `.warning`.
///
/// A forecast warning needs all of: the horizon on (``PressurePolicy/forecastHorizon`` > 0);
/// usage at or above half the capacity (from further away a line is too long a guess); at least
/// ``minimumSamples`` readings spanning ``minimumSpanSeconds``; a confidence of at least
/// ``minimumConfidence`` (the slope is that many standard errors above zero, which a flat load's
/// noise reaches by chance far less than once in a thousand fits); and the critical mark within
/// the horizon. Pure logic.
enum ForecastRule {
    static let minimumSamples = 5
    static let minimumSpanSeconds = 1.0
    static let minimumConfidence = 5.0
    /// Below this share of the capacity no forecast warns.
    static let floorRatio = 0.5

    /// The forecast a snapshot and an estimate give, or `nil` when usage is not clearly growing
    /// or there is no capacity to grow into.
    static func forecast(_ estimate: GrowthEstimate?, snapshot: PressureSnapshot, policy: PressurePolicy) -> PressureForecast? {
        guard let estimate, let capacity = snapshot.capacityBytes, capacity > 0,
            estimate.samples >= 3, estimate.confidence >= 2, estimate.bytesPerSecond > 0
        else { return nil }
        let usage = Double(snapshot.usageBytes)
        let critical = Double(min(LevelMarks(policy: policy, capacityBytes: capacity).criticalBytes, capacity))
        return PressureForecast(
            growth: estimate, secondsToCritical: max(0, (critical - usage) / estimate.bytesPerSecond),
            secondsToLimit: max(0, (Double(capacity) - usage) / estimate.bytesPerSecond))
    }

    /// Whether a forecast is trusted enough to raise `.warning`.
    ///
    /// The floor is the binding limit's share (``PressureSnapshot/ratio``), not the level's
    /// (``PressureSnapshot/levelRatio``): the growth is fitted on the binding limit's usage, and
    /// its forecast is of that limit; another limit further past its marks raises the level by
    /// itself.
    static func warns(_ forecast: PressureForecast?, snapshot: PressureSnapshot, policy: PressurePolicy) -> Bool {
        guard let forecast, policy.forecastHorizon > .zero, snapshot.ratio >= floorRatio else { return false }
        let growth = forecast.growth
        return growth.samples >= minimumSamples && growth.spanSeconds >= minimumSpanSeconds && growth.confidence >= minimumConfidence
            && forecast.secondsToCritical <= policy.forecastHorizon.seconds
    }
}

extension PressureForecast {
    /// Measures growth from outside a monitor: reads `sampler` `readings` times, `interval`
    /// apart, and fits the line the monitor fits (what `memwarn status` reports).
    ///
    /// - Parameters:
    ///   - sampler: what to read.
    ///   - readings: how many readings (at least 2).
    ///   - interval: the time between them.
    ///   - policy: the marks.
    /// - Returns: the last snapshot and its forecast (`nil` when usage is not clearly growing).
    /// - Throws: CgroupKit's `CgroupError` from a read; `CancellationError` when cancelled.
    package static func measure(sampler: SnapshotSampler, readings: Int, interval: Duration, policy: PressurePolicy) async throws
        -> (snapshot: PressureSnapshot, forecast: PressureForecast?)
    {
        var estimator = GrowthEstimator(window: .seconds(3600))
        var snapshot = try sampler.sample()
        for reading in 0..<max(2, readings) {
            if reading > 0 {
                try await Task.sleep(for: interval)
                snapshot = try sampler.sample()
            }
            if let capacity = snapshot.capacityBytes {
                estimator.add(seconds: ContinuousClock.now.secondsSinceStart, bytes: Double(snapshot.usageBytes), capacityBytes: Double(capacity))
            }
        }
        return (snapshot, ForecastRule.forecast(estimator.estimate, snapshot: snapshot, policy: policy))
    }
}

/// When adaptive sampling reads usage next. Pure: no clock, no I/O, tested without a kernel.
///
/// **The rule.** The next reading is due when usage could first reach the next mark: the
/// distance from usage to the nearest mark above it where crossing upwards changes something
/// (the warning mark, the critical mark, the limit), over the faster of the worst-case growth
/// rate (``PressurePolicy/worstCaseGrowthBytesPerSecond``) and the rise measured between the
/// last two readings; and, while usage falls, the distance to the nearest mark below (the
/// recovery, warning or critical mark) over the measured fall. The result is bounded by
/// ``shortestInterval`` and by ``PressurePolicy/pollInterval``. With a worst-case rate of 0
/// (adaptive sampling off) it is always the poll interval.
///
/// Reads a second, at the default 1 GiB/s: `1 GiB/s ÷ distance`, so 10 a second 100 MiB below
/// a mark, 100 a second 10 MiB below it, and at most 200 a second (``shortestInterval``) within
/// 5 MiB of one; 1 a second (the poll interval) from 1 GiB below.
///
/// **Guard bands** (cgroup v1 as root, where the kernel reports crossings of usage thresholds
/// but checks them only every 128 page events per CPU): a crossing by a small step can go
/// unreported. Only usage within ``guardBand(capacity:processors:)`` below a mark can cross it
/// that way, so a guard threshold sits there; while usage is inside the band (or a second band's
/// width below it), usage is sampled every ``guardLongestInterval``, sooner while a measured rise
/// could reach the mark first (``guardInterval(distance:risingBytesPerSecond:)``). Growth fast
/// enough to matter needs no sampling there: the kernel checks it within 128 pages and reports it.
package struct SamplingRule: Sendable, Hashable {
    /// The shortest wait between two readings.
    static let shortestInterval = Duration.milliseconds(5)
    /// The longest wait between two readings inside a guard band: how late a crossing the kernel
    /// left unreported is found at worst. Such a crossing is by growth that stopped within 128
    /// pages a CPU past the mark (more growth, and a check of the kernel's would see it); 100 ms
    /// keeps a service resting in a band at 10 reads a second (under 0.1 % of a core here; 40 ms,
    /// 25 reads, cost 0.17 %).
    static let guardLongestInterval = Duration.milliseconds(100)
    /// What one CPU can charge to a v1 memory cgroup between two threshold checks: 128 page
    /// events, plus the 64 pages of its charge stock (4 KiB pages).
    static let uncheckedBytesPerProcessor: UInt64 = (128 + 64) * 4096

    /// The worst-case growth rate, bytes a second; 0: adaptive sampling off.
    var worstCaseBytesPerSecond: Double
    /// The longest wait (``PressurePolicy/pollInterval``).
    var longestInterval: Duration

    package init(policy: PressurePolicy) {
        worstCaseBytesPerSecond = Double(policy.worstCaseGrowthBytesPerSecond)
        longestInterval = policy.pollInterval
    }

    init(worstCaseBytesPerSecond: Double, longestInterval: Duration) {
        self.worstCaseBytesPerSecond = worstCaseBytesPerSecond
        self.longestInterval = longestInterval
    }

    /// Whether the interval adapts (a worst-case rate is set).
    var isAdaptive: Bool { worstCaseBytesPerSecond > 0 }

    /// The shortest wait this rule allows: ``shortestInterval``, or the poll interval when it is
    /// shorter or adaptive sampling is off.
    var floor: Duration { isAdaptive ? min(Self.shortestInterval, longestInterval) : longestInterval }

    /// The wait until the next reading.
    ///
    /// - Parameters:
    ///   - usage: the latest usage, in bytes.
    ///   - marksAbove: the marks whose upward crossing matters, ascending: warning, critical, the
    ///     capacity (the limit).
    ///   - marksBelow: the marks whose downward crossing matters, ascending: recovery, warning,
    ///     critical.
    ///   - risingBytesPerSecond: how fast usage rose between the last two readings (0 when it
    ///     did not).
    ///   - fallingBytesPerSecond: how fast it fell (0 when it did not).
    /// - Returns: a wait within ``floor``...``longestInterval``.
    package func interval(
        usage: UInt64, marksAbove: [UInt64], marksBelow: [UInt64], risingBytesPerSecond: Double,
        fallingBytesPerSecond: Double
    ) -> Duration {
        guard isAdaptive else { return longestInterval }
        var seconds = Double.infinity
        if let above = marksAbove.first(where: { $0 > usage }) {
            seconds = Double(above - usage) / max(worstCaseBytesPerSecond, risingBytesPerSecond)
        } else {
            seconds = 0  // at or past the limit: as often as the rule allows
        }
        if fallingBytesPerSecond > 0, let below = marksBelow.last(where: { $0 <= usage }) {
            seconds = min(seconds, Double(usage - below) / fallingBytesPerSecond)
        }
        return Self.clamp(seconds, floor, longestInterval)
    }

    /// The width of the band below a mark where a v1 crossing can go unreported: what every CPU
    /// together can charge between two threshold checks, twice over (a margin for the check's
    /// own timing), at least 1 MiB, and at most 5 % of the capacity, the spacing of the usage
    /// thresholds. The cap leaves a gap where the CPUs can charge more than 5 % of a limit
    /// unchecked (about CPUs × 0.75 MiB ≥ 5 %: 32 CPUs under 480 MiB): a step that large which
    /// stops just past a mark can go unreported by the kernel, and is below the band.
    ///
    /// - Parameters:
    ///   - capacity: the limit in bytes.
    ///   - processors: the CPUs that may charge the cgroup.
    /// - Returns: the band's width in bytes.
    static func guardBand(capacity: UInt64, processors: Int) -> UInt64 {
        let unchecked = UInt64(max(1, processors)) * uncheckedBytesPerProcessor * 2
        return min(max(unchecked, 1 << 20), capacity / 20)
    }

    /// The next wait inside a guard band: ``guardLongestInterval``, or less while usage rises:
    /// the time the measured rise takes to reach the mark, at least ``shortestInterval`` — whatever
    /// the worst-case rate: the bands belong to the kernel's events, not to adaptive sampling (the
    /// kernel reports a fast climb itself).
    ///
    /// - Parameters:
    ///   - distance: bytes from usage up to the mark above it.
    ///   - risingBytesPerSecond: how fast usage rose between the last two readings (0 when it did not).
    /// - Returns: the next wait.
    func guardInterval(distance: UInt64, risingBytesPerSecond: Double) -> Duration {
        guard risingBytesPerSecond > 0 else { return Self.guardLongestInterval }
        return Self.clamp(Double(distance) / risingBytesPerSecond, Self.shortestInterval, Self.guardLongestInterval)
    }

    private static func clamp(_ seconds: Double, _ low: Duration, _ high: Duration) -> Duration {
        guard seconds.isFinite else { return high }
        let wanted = Duration.nanoseconds(Int64(min(seconds, 1e9) * 1e9))
        return min(max(wanted, low), high)
    }
}

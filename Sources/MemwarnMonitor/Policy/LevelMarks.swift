package import MemwarnRelease
import MemwarnSystem

/// The policy's marks on one limit: where `warning` and `critical` begin and the `recovery`
/// mark under which a raised level may step down, as shares of the limit and as bytes, with the
/// usage thresholds cgroup v1 registers and the smallest release worth making.
///
/// Made once for a limit (and again when the limit changes): every place that puts the policy's
/// marks on a limit takes them from here — the level machine, the usage sampler and its guard
/// bands, the v1 thresholds, a release's target and exhaustion, the forecast, a leased service's
/// backstop, the node agent and `memwarn status`. A mark in bytes is its share of the limit,
/// rounded down; a level is decided on the share itself, so that a limit's marks and its level
/// never disagree by a rounding.
package struct LevelMarks: Sendable, Hashable {
    /// The limit (or the measure's capacity) the marks are placed on.
    package let capacityBytes: UInt64
    /// Usage at or above this share raises `.warning`.
    package let warningRatio: Double
    /// Usage at or above this share raises `.critical`; above 1, usage never does.
    package let criticalRatio: Double
    /// Usage must fall under this share before a raised level steps down.
    package let recoveryRatio: Double
    /// The warning mark in bytes.
    package let warningBytes: UInt64
    /// The critical mark in bytes: above the limit when ``criticalRatio`` is above 1 (usage then
    /// never raises `.critical`).
    package let criticalBytes: UInt64
    /// The recovery mark in bytes.
    package let recoveryBytes: UInt64

    /// The marks of `policy` on a limit of `capacityBytes`.
    package init(policy: PressurePolicy, capacityBytes: UInt64) {
        self.capacityBytes = capacityBytes
        (warningRatio, criticalRatio, recoveryRatio) = (policy.warningRatio, policy.criticalRatio, policy.recoveryRatio)
        warningBytes = Self.bytes(policy.warningRatio, of: capacityBytes)
        criticalBytes = Self.bytes(policy.criticalRatio, of: capacityBytes)
        recoveryBytes = Self.bytes(policy.recoveryRatio, of: capacityBytes)
    }

    /// A share of a capacity in bytes, rounded down: the one place a share becomes bytes.
    package static func bytes(_ ratio: Double, of capacityBytes: UInt64) -> UInt64 {
        UInt64(min(Double(capacityBytes) * max(0, ratio), Double(UInt64.max / 2)))
    }

    /// Usage as a share of the limit (1 for a limit of 0: nothing fits under it).
    package func ratio(of usageBytes: UInt64) -> Double {
        capacityBytes == 0 ? 1 : Double(usageBytes) / Double(capacityBytes)
    }

    // MARK: Levels

    /// The level usage asks for at these marks, without hysteresis, and whether it stands
    /// between the recovery and the warning marks (where a raised level holds).
    package func asked(byUsage usageBytes: UInt64) -> (level: MemoryPressureLevel, inRecoveryBand: Bool) {
        Self.asked(byRatio: ratio(of: usageBytes), warning: warningRatio, critical: criticalRatio, recovery: recoveryRatio)
    }

    /// The level a share of a limit asks for at `policy`'s marks: the highest share among several
    /// limits (``PressureSnapshot/levelRatio``) asks for the highest of their levels, each limit
    /// having the same marks as shares.
    package static func asked(byRatio ratio: Double, policy: PressurePolicy) -> (level: MemoryPressureLevel, inRecoveryBand: Bool) {
        asked(byRatio: ratio, warning: policy.warningRatio, critical: policy.criticalRatio, recovery: policy.recoveryRatio)
    }

    /// Whether a share of a limit is at the critical mark, or at the limit itself when the
    /// critical mark lies above it: where a release that fell short leaves memory exhausted.
    package static func isAtCriticalOrLimit(ratio: Double, policy: PressurePolicy) -> Bool {
        ratio >= min(policy.criticalRatio, 1)
    }

    private static func asked(byRatio ratio: Double, warning: Double, critical: Double, recovery: Double) -> (
        level: MemoryPressureLevel, inRecoveryBand: Bool
    ) {
        if ratio >= critical { return (.critical, false) }
        if ratio >= warning { return (.warning, false) }
        return (.normal, ratio >= recovery)
    }

    // MARK: Bytes

    /// The recovery, warning and critical marks that lie within the limit, ascending: where a
    /// fall of usage matters, and the tops of the guard bands.
    package var levelMarkBytes: [UInt64] {
        [(recoveryRatio, recoveryBytes), (warningRatio, warningBytes), (criticalRatio, criticalBytes)].filter { $0.0 <= 1 }.map(\.1).sorted()
    }

    /// The warning and critical marks and the limit itself, ascending: where a rise matters.
    package var marksAboveBytes: [UInt64] {
        ([(warningRatio, warningBytes), (criticalRatio, criticalBytes)].filter { $0.0 <= 1 }.map(\.1) + [capacityBytes]).sorted()
    }

    /// The shares cgroup v1's usage thresholds are registered at: the recovery, warning and
    /// critical marks, and every 5 % of the limit from half of it up, so that a climb gives the
    /// growth estimate an event-driven reading each twentieth of the limit.
    package var thresholdRatios: [Double] {
        var ratios = [recoveryRatio, warningRatio, criticalRatio].filter { $0 <= 1 }
        for step in (10...19).map({ Double($0) * 0.05 }) where !ratios.contains(where: { abs($0 - step) < 0.01 }) { ratios.append(step) }
        return ratios.sorted()
    }

    /// ``thresholdRatios`` in bytes.
    package var thresholdBytes: [UInt64] { thresholdRatios.map { Self.bytes($0, of: capacityBytes) } }

    /// The bytes over the mark at `ratio` (where a release takes usage under) once that mark is
    /// lowered by `headroom` (room for growth until the next release can act; at most the mark
    /// itself): what a release of this limit's usage must free. Negative when usage is under it.
    package func excessBytes(usage usageBytes: UInt64, overRatio ratio: Double, lessHeadroom headroom: Double = 0) -> Double {
        let mark = Double(capacityBytes) * ratio
        return Double(usageBytes) - (mark - min(mark, max(0, headroom)))
    }

    /// The share a release made while the level stays raised takes usage under
    /// (``ReleaseDepth/underWarning(growthBytesPerSecond:)``): the warning mark less the most of a
    /// quarter of the band down to the recovery mark, the smallest release, and the growth of
    /// ``repeatReleaseSpacing``; never below the recovery mark. At the default marks and slow
    /// growth, 77.5 % of the limit; growth of 40 % of the limit a second or more, the recovery
    /// mark (a release at most every quarter second while it lasts).
    ///
    /// - Parameter growthBytesPerSecond: the measured growth (negative or not finite counts as 0).
    package func repeatReleaseRatio(growthBytesPerSecond: Double) -> Double {
        guard capacityBytes > 0 else { return recoveryRatio }
        let growth = growthBytesPerSecond.isFinite ? max(0, growthBytesPerSecond) : 0
        let gap = max(
            (warningRatio - recoveryRatio) / 4, Double(smallestReleaseBytes) / Double(capacityBytes),
            growth * Self.repeatReleaseSpacing.seconds / Double(capacityBytes))
        return max(recoveryRatio, warningRatio - gap)
    }

    /// The growth a release made while the level stays raised leaves room for under the warning
    /// mark: at most about four such releases a second while growth lasts.
    package static let repeatReleaseSpacing = Duration.milliseconds(250)

    /// The smallest change of usage that counts as a release (or as one worth asking for): 1 % of
    /// the limit, 1 MiB at least. Less is within what an allocator and the kernel's per-CPU
    /// charge batches move by themselves.
    package var smallestReleaseBytes: UInt64 { max(1 << 20, capacityBytes / 100) }

    /// The width of the band under a mark where a cgroup v1 crossing can go unreported
    /// (``SamplingRule/guardBand(capacity:processors:)``).
    package func guardBandBytes(processors: Int) -> UInt64 {
        SamplingRule.guardBand(capacity: capacityBytes, processors: processors)
    }
}

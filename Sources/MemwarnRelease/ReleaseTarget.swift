/// How much a release asks for: enough to bring usage back below the recovery mark, less
/// headroom for the growth expected before the next release can act.
///
/// `bytes = max(0, usage − (recovery_ratio × limit − headroom))`, where
/// `headroom = growth × lead time`, capped at the recovery mark itself. The growth is the
/// monitor's measured rate (`GrowthEstimate.sustainedBytesPerSecond`); the lead time is how
/// long the next detection and release take: the monitor's detection bound (10 ms where the
/// kernel reports usage crossings, the sampler's current wait where usage is sampled — 5 ms near
/// a mark, at most `PressurePolicy.pollInterval`) plus the duration of the last release. A
/// monitor's release while its level stays raised at `warning` (usage back at the warning mark,
/// no rise) aims just under the warning mark instead of the recovery mark (the article "Keeping
/// up with growth" has the formula).
package struct ReleaseTarget: Sendable, Hashable {
    /// The bytes wanted.
    package var bytes: Int
    /// The part of ``bytes`` that is headroom for growth.
    package var headroomBytes: Int
    /// The growth rate the headroom was sized with, in bytes a second.
    package var growthBytesPerSecond: Double
    /// The time the headroom covers.
    package var leadTime: Duration

    /// A target of exactly `bytes`, with no headroom.
    ///
    /// - Parameter bytes: the bytes wanted.
    package init(bytes: Int) {
        self.init(bytes: bytes, headroomBytes: 0, growthBytesPerSecond: 0, leadTime: .zero)
    }

    /// Creates a target.
    ///
    /// - Parameters:
    ///   - bytes: the bytes wanted, headroom included.
    ///   - headroomBytes: the part of `bytes` that is headroom for growth.
    ///   - growthBytesPerSecond: the growth rate the headroom was sized with.
    ///   - leadTime: the time the headroom covers.
    package init(bytes: Int, headroomBytes: Int, growthBytesPerSecond: Double, leadTime: Duration) {
        self.bytes = bytes
        self.headroomBytes = headroomBytes
        self.growthBytesPerSecond = growthBytesPerSecond
        self.leadTime = leadTime
    }

}

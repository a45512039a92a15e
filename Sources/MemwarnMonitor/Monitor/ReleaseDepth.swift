package import MemwarnRelease

/// How far an automatic release takes usage down.
///
/// A release for a rise of the level (the memory warning itself) or at `critical` takes usage
/// back below the recovery mark: the level can then step down, and there is room for what comes
/// next. A release made while the level stays raised at `warning`, because usage came back to the
/// warning mark with no rise, takes usage only just under the warning mark
/// (``LevelMarks/repeatReleaseRatio(growthBytesPerSecond:)``): a cache that refills at once would
/// only refill what a deeper release took, so the service keeps more of what it holds and each
/// release is smaller. Fast growth gets the deeper release still: the mark leaves room for a
/// quarter second of it.
package enum ReleaseDepth: Sendable, Hashable {
    /// Below the recovery mark.
    case belowRecovery
    /// Just under the warning mark, with room for `growthBytesPerSecond` for a quarter second.
    case underWarning(growthBytesPerSecond: Double)

    /// The depth of the release a reading asks for: just under the warning mark only when the
    /// monitor's level stayed at `warning` (it was `warning` before the reading, and is after),
    /// no rise came with the reading (nor with one it was coalesced with), and the release is at
    /// `warning`; below the recovery mark for a rise, a monitor's first reading, a level held at
    /// `critical` (after an OOM kill, say) and a release at `critical`.
    ///
    /// - Parameters:
    ///   - event: the reading's level and the level before it.
    ///   - rise: the level the reading, or one coalesced into it, rose to.
    ///   - releaseLevel: the level the release is made at.
    ///   - growthBytesPerSecond: the measured growth.
    package static func of(
        _ event: LevelEvent, rise: MemoryPressureLevel?, releaseAt releaseLevel: MemoryPressureLevel, growthBytesPerSecond: Double
    ) -> ReleaseDepth {
        let stayedAtWarning = event.previous == .warning && event.level == .warning && rise == nil
        return stayedAtWarning && releaseLevel == .warning ? .underWarning(growthBytesPerSecond: growthBytesPerSecond) : .belowRecovery
    }

    /// The share of the limit this depth takes usage under, at `marks`.
    package func ratio(at marks: LevelMarks) -> Double {
        switch self {
        case .belowRecovery: marks.recoveryRatio
        case .underWarning(let growth): marks.repeatReleaseRatio(growthBytesPerSecond: growth)
        }
    }
}

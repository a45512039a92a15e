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

    /// The depth of a release at `level`: `rise` is the level the reading rose to, if it rose;
    /// `growthBytesPerSecond` the measured growth.
    package static func of(releaseAt level: MemoryPressureLevel, rise: MemoryPressureLevel?, growthBytesPerSecond: Double) -> ReleaseDepth {
        rise == nil && level == .warning ? .underWarning(growthBytesPerSecond: growthBytesPerSecond) : .belowRecovery
    }

    /// The share of the limit this depth takes usage under, at `marks`.
    package func ratio(at marks: LevelMarks) -> Double {
        switch self {
        case .belowRecovery: marks.recoveryRatio
        case .underWarning(let growth): marks.repeatReleaseRatio(growthBytesPerSecond: growth)
        }
    }
}

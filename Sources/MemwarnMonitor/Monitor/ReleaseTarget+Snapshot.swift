package import MemwarnRelease

// The release layer sizes a release from bytes; from a snapshot and a policy, here in the
// monitor's layer, which owns both.

/// A target sized from a reading and the policy's marks.
extension ReleaseTarget {
    /// The target for a snapshot: usage back below the recovery mark less the headroom, for
    /// every counted limit (the largest excess among them).
    ///
    /// - Parameters:
    ///   - snapshot: the reading released from (without a capacity, the target is 0).
    ///   - policy: the recovery mark.
    ///   - growthBytesPerSecond: the measured growth (negative counts as 0).
    ///   - leadTime: how long until the next release can act.
    /// - Returns: the target; 0 bytes when usage is already below the mark less the headroom.
    package static func make(for snapshot: PressureSnapshot, policy: PressurePolicy, growthBytesPerSecond: Double, leadTime: Duration) -> ReleaseTarget {
        make(for: snapshot, under: .belowRecovery, policy: policy, growthBytesPerSecond: growthBytesPerSecond, leadTime: leadTime)
    }

    /// The target for a snapshot: usage back under the mark `depth` names, less the headroom, for
    /// every counted limit (the largest excess among them).
    package static func make(
        for snapshot: PressureSnapshot, under depth: ReleaseDepth, policy: PressurePolicy, growthBytesPerSecond: Double, leadTime: Duration
    ) -> ReleaseTarget {
        guard snapshot.capacityBytes != nil else { return ReleaseTarget(bytes: 0) }
        let growth = max(0, growthBytesPerSecond.isFinite ? growthBytesPerSecond : 0)
        let headroom = growth * leadTime.seconds
        // Every counted limit back under its mark: the largest excess (the binding limit's,
        // unless a larger parent is further past its marks).
        let bytes = max(0, snapshot.excess(under: depth, policy: policy, lessHeadroom: headroom).rounded(.up))
        let withoutHeadroom = max(0, snapshot.excess(under: depth, policy: policy).rounded(.up))
        // The part of the target the headroom accounts for (all of it when usage is below the mark).
        let headroomPart = min(bytes, max(0, bytes - withoutHeadroom))
        return ReleaseTarget(bytes: Int(bytes), headroomBytes: Int(headroomPart), growthBytesPerSecond: growth, leadTime: leadTime)
    }
}

/// The bare target of a release on request.
extension ReleaseCoordinator {
    /// The bytes to free so that usage falls back below the recovery mark, or 0 when it
    /// already is (then only discarded content is dropped). No headroom for growth: see
    /// `make(for:policy:growthBytesPerSecond:leadTime:)` for the target the
    /// monitor's automatic releases use.
    ///
    /// - Parameters:
    ///   - snapshot: the current reading.
    ///   - policy: the marks; the target is measured from the recovery mark.
    /// - Returns: the bytes to free, 0 or more.
    package static func target(for snapshot: PressureSnapshot, policy: PressurePolicy) -> Int {
        ReleaseTarget.make(for: snapshot, policy: policy, growthBytesPerSecond: 0, leadTime: .zero).bytes
    }
}

extension MemoryTrend.Sample {
    /// A floor sample from one poll of a service: the cgroup's anonymous memory read just before
    /// and just after the service's `status`, less the consumers' footprint in that status.
    ///
    /// The status and the cgroup cannot be read at one instant. When a release runs between the
    /// two reads of anonymous memory, the footprint belongs to a different moment from the memory
    /// it is taken from: a footprint from before the release less anonymous memory from after it
    /// reads as a floor of nothing (a 10 s soak in the v2 VM reported a floor of 0 bytes so), and
    /// the reverse as too much. Such a poll gives no sample (`nil`): a fall of at least
    /// ``MemoryTrend/smallestFall(limitBytes:)`` between the reads is a release, as
    /// ``MemoryTrend/fallsUnderPressure(_:levelChanges:limitBytes:)`` counts one. A rise between
    /// them is the service's growth, at most a poll's worth, and the later read is used.
    ///
    /// - Parameters:
    ///   - seconds: when the poll ended, from the start of the run.
    ///   - anonymousBefore: anonymous memory read before the status was asked for.
    ///   - anonymousAfter: anonymous memory read after the status came.
    ///   - footprintBytes: what the consumers held, as the status said; `nil` when no status was
    ///     read (a service without memwarn: its floor sample is its anonymous memory).
    ///   - heapFloorBytes: the heap in use less the footprint, from the same status.
    ///   - limitBytes: the run's limit.
    /// - Returns: the sample, or `nil` when memory fell while the service answered.
    static func paired(
        seconds: Double, anonymousBefore: UInt64, anonymousAfter: UInt64, footprintBytes: UInt64?, heapFloorBytes: UInt64?,
        limitBytes: UInt64
    ) -> Self? {
        guard let footprintBytes else {
            return .init(seconds: seconds, floorBytes: anonymousAfter, heapFloorBytes: nil)
        }
        if anonymousBefore > anonymousAfter, anonymousBefore - anonymousAfter >= MemoryTrend.smallestFall(limitBytes: limitBytes) {
            return nil
        }
        let floor = anonymousAfter > footprintBytes ? anonymousAfter - footprintBytes : 0
        return .init(seconds: seconds, floorBytes: floor, heapFloorBytes: heapFloorBytes)
    }
}

import MemwarnSystem

/// What a coordinator has released since it was made: releases, and bytes freed by tier and by
/// consumer. `memwarn soak` reads it through the control endpoint's `status`.
///
/// The consumers are counted by name, at most ``maximumConsumerNames`` of them: consumers
/// named later are summed under ``otherConsumers``, so names made from request data cannot
/// grow it without bound.
package struct ReleaseTotals: Sendable, Hashable {
    /// The most consumer names counted one by one.
    package static let maximumConsumerNames = 64
    /// The name the bytes of consumers past ``maximumConsumerNames`` are counted under.
    package static let otherConsumers = "(other consumers)"

    /// Releases made at a level above normal: each automatic release, and each one asked for at
    /// `warning` or `critical` (a release at `normal` frees nothing and is not counted).
    package var releases = 0
    /// Bytes freed, by tier name (`discarded`, `caches`, `media`, `shared-resources`, `suspended-units`).
    package var freedBytesByTier: [String: Int] = [:]
    /// Bytes freed, by consumer name.
    package var freedBytesByConsumer: [String: Int] = [:]
    /// Seconds spent in those releases (each release's ``ReleaseReport/duration``, trimming
    /// included): what survival cost the service's threads.
    package var seconds = 0.0

    /// No release yet.
    package init() {}

    /// Adds one release's report.
    ///
    /// - Parameter report: what the release did.
    mutating func add(_ report: ReleaseReport) {
        guard report.level > .normal else { return }
        releases += 1
        seconds += max(0, report.duration.seconds)
        // Each sum held at Int.max: a consumer's word is not checked, and a total never traps.
        for entry in report.entries where entry.bytesFreed > 0 {
            freedBytesByTier[entry.tier.name] = freedBytesByTier[entry.tier.name, default: 0].addingSaturating(entry.bytesFreed)
            let name =
                freedBytesByConsumer[entry.consumer] != nil || freedBytesByConsumer.count < Self.maximumConsumerNames
                ? entry.consumer : Self.otherConsumers
            freedBytesByConsumer[name] = freedBytesByConsumer[name, default: 0].addingSaturating(entry.bytesFreed)
        }
    }
}

import MemwarnRelease
import MemwarnSystem

extension ControlStatus {
    /// The status in its summary form: one consumer a tier, named for the tier and how many
    /// consumers it folds (`caches (3 consumers)`), holding their footprints and in-use bytes
    /// summed, in release order; and the bytes released by consumer and the monitor's sources left
    /// out (by tier, the bytes stay).
    /// What a node agent needs — what a service holds and could give at each level — in a reply
    /// whose size does not grow with the consumers a service registers.
    ///
    /// - Complexity: O(*n*) in the consumers.
    package func foldedByTier() -> ControlStatus {
        var folded = self
        var tiers: [String] = []
        var byTier: [String: [Consumer]] = [:]
        for consumer in consumers {
            if byTier[consumer.tier] == nil { tiers.append(consumer.tier) }
            byTier[consumer.tier, default: []].append(consumer)
        }
        folded.consumers = tiers.map { tier in
            let members = byTier[tier] ?? []
            let footprint = members.lazy.map(\.footprintBytes).saturatingSum()
            let inUse = members.contains { $0.inUseBytes != nil } ? min(footprint, members.lazy.map { $0.inUseBytes ?? 0 }.saturatingSum()) : nil
            return Consumer(
                name: "\(tier) (\(members.count) consumer\(members.count == 1 ? "" : "s"))", tier: tier, footprintBytes: footprint, inUseBytes: inUse)
        }
        folded.released.freedBytesByConsumer = [:]
        folded.monitorSources = []
        return folded
    }
}

import MemwarnSystem

extension ReleaseReport {
    /// The report in its summary form: one entry a tier, in the order the tiers were released,
    /// named for the tier and how many consumers it folds (`caches (3 consumers)`), with their
    /// bytes and durations summed. ``freedBytes`` and ``metTarget`` are unchanged; the reply a
    /// node agent reads stays small whatever the service registers.
    ///
    /// - Complexity: O(*n*) in the entries.
    package func foldedByTier() -> ReleaseReport {
        var tiers: [ReleaseTier] = []
        var byTier: [ReleaseTier: [Entry]] = [:]
        for entry in entries {
            if byTier[entry.tier] == nil { tiers.append(entry.tier) }
            byTier[entry.tier, default: []].append(entry)
        }
        var folded = self
        folded.entries = tiers.map { tier in
            let members = byTier[tier] ?? []
            return Entry(
                consumer: "\(tier.name) (\(members.count) consumer\(members.count == 1 ? "" : "s"))", tier: tier,
                bytesBefore: members.lazy.map(\.bytesBefore).saturatingSum(), bytesAfter: members.lazy.map(\.bytesAfter).saturatingSum(),
                bytesFreed: members.lazy.map(\.bytesFreed).saturatingSum(),
                duration: members.reduce(.zero) { $0 + $1.duration }, bytesInUse: members.lazy.map(\.bytesInUse).saturatingSum())
        }
        return folded
    }
}

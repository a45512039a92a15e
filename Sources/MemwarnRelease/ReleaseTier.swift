/// Where a memory consumer stands in the release order.
///
/// On a warning the coordinator walks the tiers in this order and, within a tier, asks the
/// largest consumer first, until the target is met:
///
/// 1. ``discarded``: content already discarded or expired (free to drop)
/// 2. ``caches``: caches of recomputable values (entries not under access)
/// 3. ``media``: decoded media that can be rebuilt from disk
/// 4. ``sharedResources``: idle shared-resource handles (`.critical` only)
/// 5. ``suspendedUnits``: terminating suspended units (`.critical` only; the life-cycle layer)
public struct ReleaseTier: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// The position in the order (lower goes first).
    package let rank: Int
    /// The tier's name, as reports print it.
    public let name: String
    /// The most severe level needed before this tier is asked.
    public let minimumLevel: MemoryPressureLevel

    private init(rank: Int, name: String, minimumLevel: MemoryPressureLevel) {
        self.rank = rank
        self.name = name
        self.minimumLevel = minimumLevel
    }

    /// Content already discarded or expired: free to drop.
    public static let discarded = ReleaseTier(rank: 1, name: "discarded", minimumLevel: .warning)
    /// Caches of recomputable values.
    public static let caches = ReleaseTier(rank: 2, name: "caches", minimumLevel: .warning)
    /// Decoded media that can be rebuilt from its source file.
    public static let media = ReleaseTier(rank: 3, name: "media", minimumLevel: .warning)
    /// Idle shared-resource handles (connections, descriptors).
    public static let sharedResources = ReleaseTier(rank: 4, name: "shared-resources", minimumLevel: .critical)
    /// Suspended units, terminated largest first.
    public static let suspendedUnits = ReleaseTier(rank: 5, name: "suspended-units", minimumLevel: .critical)

    /// Every tier, in release order.
    public static let all: [ReleaseTier] = [.discarded, .caches, .media, .sharedResources, .suspendedUnits]

    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rank < rhs.rank }

    public var description: String { name }
}

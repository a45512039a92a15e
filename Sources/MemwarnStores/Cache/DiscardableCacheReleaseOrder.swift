/// Which entries a memory release takes first from a ``DiscardableCache`` when it asks for part
/// of the cache's bytes (a release of everything takes everything).
///
/// Measured with `Benchmarks/run hits`: on a Zipf 0.9 trace, after releasing half of the bytes
/// of a cache of 1 % and 10 % of the keys, the three orders' hit ratios over the next requests
/// were within a point of each other (one seed, one run); ``balanced`` evicts fewer entries
/// for the bytes than ``coldestFirst``. The figures are in the README. Under many small
/// releases of a cache with no limit of its own (memwarn holding it under the warning mark),
/// only ``coldestFirst`` keeps the hits of a cache with a fixed limit of the same size: the
/// Hummingbird example under 64 MiB hit 81.3 % with ``balanced`` and as often as the best fixed
/// budget with ``coldestFirst`` (`Benchmarks/README.md`, `footprint`).
public struct DiscardableCacheReleaseOrder: Sendable, Hashable, CustomStringConvertible {
    @usableFromInline
    enum Base: String, Sendable, Hashable {
        case balanced = "balanced"
        case largestFirst = "largest first"
        case coldestFirst = "coldest first"
    }

    @usableFromInline let base: Base

    @inlinable
    init(_ base: Base) { self.base = base }

    /// The most bytes for the least use first: each entry's cost divided by one more than its
    /// coldness rank (0 for an entry never read since it came, up to 5 for one read three times
    /// or more in the main queue), the highest first. A large entry nobody reads goes before a
    /// small one; a small entry read often goes last. Its coldness is what the eviction last saw:
    /// in a cache with no limit, which never evicts on its own, every entry read a few times looks
    /// the same.
    public static let balanced = Self(.balanced)
    /// The largest cost first, whatever its use: the fewest evictions for the bytes.
    public static let largestFirst = Self(.largestFirst)
    /// The eviction policy's own walk, as if the cache's cost limit were lowered to what it holds
    /// less the target: entries read since they came move to the main queue, the main queue
    /// gives each entry one chance a read, and those never read go first. So a cache that
    /// releases keep at a size holds what a cache with that fixed limit would hold, release after
    /// release. It evicts the most entries for the bytes (small cold entries go before large
    /// ones) and takes O(1) a removed entry. The default.
    public static let coldestFirst = Self(.coldestFirst)

    public var description: String { base.rawValue }
}

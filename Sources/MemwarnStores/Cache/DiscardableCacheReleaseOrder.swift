/// Which entries a memory release takes first from a ``DiscardableCache`` when it asks for part
/// of the cache's bytes (a release of everything takes everything).
///
/// Measured with `Benchmarks/run hits`: on a Zipf 0.9 trace, after releasing half of the bytes
/// of a cache of 1 % and 10 % of the keys, the three orders' hit ratios over the next requests
/// were within a point of each other (one seed, one run); ``balanced`` evicts fewer entries
/// for the bytes than ``coldestFirst``. The figures are in the README.
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
    /// small one; a small entry read often goes last. The default.
    public static let balanced = Self(.balanced)
    /// The largest cost first, whatever its use: the fewest evictions for the bytes.
    public static let largestFirst = Self(.largestFirst)
    /// The order the eviction policy would evict in: entries never read since they came, then
    /// those not read since they were last looked at, and so on up to the most read; the
    /// oldest first among equals. Keeps what the policy values most, but evicts the most
    /// entries for the bytes (small cold entries go before large ones).
    public static let coldestFirst = Self(.coldestFirst)

    public var description: String { base.rawValue }
}

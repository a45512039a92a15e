import Hummingbird
import Memwarn
import Metrics

/// Rendered reports, kept until memwarn takes them back.
///
/// A `DiscardableCache` (NSCache's API) with no `totalCostLimit`: the cache may use whatever
/// memory the service does not, and memwarn sizes it to the cgroup. On a warning the release
/// coordinator takes entries back (as the cache's own eviction would, none that is being read)
/// until usage is back below the recovery mark (just under the warning mark while the level
/// stays at warning), with headroom for the growth it measured; the next request for
/// a released report renders it again. The cost of an entry is its bytes.
///
/// `--cache-budget` gives it a `totalCostLimit` instead: a fixed budget, what a careful user
/// does without memwarn (the footprint benchmark compares the two). `--miss-delay-ms` makes each
/// render wait that long first, as the database query behind a real render would.
final class RenderCache: Sendable {
    private let cache = DiscardableCache<Int, ByteBuffer>()  // registers with ReleaseCoordinator.shared
    private let bytesPerRender: Int
    private let missDelay: Duration
    private let hits = Counter(label: "service_cache_hits_total")
    private let misses = Counter(label: "service_cache_misses_total")

    init(bytesPerRender: Int, budgetBytes: Int? = nil, missDelay: Duration = .zero) {
        self.bytesPerRender = bytesPerRender
        self.missDelay = missDelay
        cache.name = "renders"  // the consumer's name in release reports and metrics
        if let budgetBytes { cache.totalCostLimit = budgetBytes }
    }

    /// The report's page, from the cache or rendered now (and cached).
    func page(for id: Int) async throws -> (page: ByteBuffer, hit: Bool) {
        if let page = cache.object(forKey: id) {
            hits.increment()
            return (page, true)
        }
        misses.increment()
        if missDelay > .zero { try await Task.sleep(for: missDelay) }
        let page = renderReport(id, bytes: bytesPerRender)
        cache.setObject(page, forKey: id, cost: page.capacity)
        return (page, false)
    }

    var entries: Int { cache.count }
    var bytes: Int { cache.totalCost }
}

/// Renders report `id` as an HTML page of about `bytes` bytes. Stands in for a template render
/// with a database query behind it: worth caching, always possible again.
func renderReport(_ id: Int, bytes: Int) -> ByteBuffer {
    var page = ByteBufferAllocator().buffer(capacity: bytes)
    page.writeString("<!doctype html><title>Report \(id)</title><h1>Report \(id)</h1>\n<table>\n")
    var seed = UInt64(truncatingIfNeeded: id) &* 0x9E37_79B9_7F4A_7C15 | 1
    var row = 0
    while page.writerIndex + 512 + 32 <= bytes {
        seed ^= seed << 13; seed ^= seed >> 7; seed ^= seed << 17  // xorshift: every report differs
        row += 1
        let cells = "<tr><td>\(row)</td><td>\(seed % 100_000)</td><td>\(seed >> 40)</td><td>"
        page.writeString(cells)
        page.writeRepeatingByte(UInt8(ascii: "a") + UInt8(seed % 26), count: 512 - cells.utf8.count - 11)
        page.writeString("</td></tr>\n")
    }
    page.writeString("</table>\n")
    return page
}

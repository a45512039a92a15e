import Memwarn
import NIOCore

/// Rendered reports, kept until memwarn takes them back.
///
/// A `DiscardableCache` (NSCache's API) with no `totalCostLimit`: the cache may use whatever
/// memory the service does not, and memwarn sizes it to the cgroup. On a warning the release
/// coordinator takes entries back (as the cache's own eviction would, none that is being read)
/// until usage is back below the recovery mark (just under the warning mark while the level
/// stays at warning); the next request for a released report queries its row and
/// renders it again. The cost of an entry is its bytes.
final class RenderCache: Sendable {
    private let cache = DiscardableCache<Int, ByteBuffer>()  // registers with ReleaseCoordinator.shared
    let bytesPerRender: Int

    init(bytesPerRender: Int) {
        self.bytesPerRender = bytesPerRender
        cache.name = "renders"  // the consumer's name in release reports and metrics
    }

    /// The page cached for `id`, if memwarn has not taken it back.
    func page(for id: Int) -> ByteBuffer? { cache.object(forKey: id) }

    /// Caches `page` for `id`.
    func store(_ page: ByteBuffer, for id: Int) { cache.setObject(page, forKey: id, cost: page.capacity) }

    var entries: Int { cache.count }
    var bytes: Int { cache.totalCost }
}

/// Renders a report as an HTML page of about `bytes` bytes: its row, then a table of lines
/// derived from it. Stands in for a template render over the query's rows: worth caching,
/// always possible again.
func renderReport(_ row: ReportRow, as id: Int, bytes: Int) -> ByteBuffer {
    var page = ByteBufferAllocator().buffer(capacity: bytes)
    page.writeString("<!doctype html><title>\(row.title)</title><h1>Report \(id): \(row.title)</h1>\n")
    page.writeString("<p>owner \(row.owner), amount \(row.amount): \(row.note)</p>\n<table>\n")
    var seed = UInt64(truncatingIfNeeded: id &* 31 &+ row.amount) &* 0x9E37_79B9_7F4A_7C15 | 1
    var line = 0
    while page.writerIndex + 512 + 32 <= bytes {
        seed ^= seed << 13
        seed ^= seed >> 7
        seed ^= seed << 17  // xorshift: every report differs
        line += 1
        let cells = "<tr><td>\(line)</td><td>\(seed % 100_000)</td><td>\(seed >> 40)</td><td>"
        page.writeString(cells)
        page.writeRepeatingByte(UInt8(ascii: "a") + UInt8(seed % 26), count: 512 - cells.utf8.count - 11)
        page.writeString("</td></tr>\n")
    }
    page.writeString("</table>\n")
    return page
}

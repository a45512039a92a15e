import Hummingbird
import Memwarn

/// Rendered reports, kept until memwarn takes them back.
///
/// A `DiscardableCache` (NSCache's API) with no `totalCostLimit`: the cache may use whatever
/// memory the service does not, and memwarn sizes it to the cgroup. On a warning the release
/// coordinator takes entries back (largest cost first, none that is being read) until usage is
/// back below the recovery mark, with headroom for the growth it measured; the next request for
/// a released report renders it again. The cost of an entry is its bytes.
final class RenderCache: Sendable {
    private let cache = DiscardableCache<Int, ByteBuffer>()  // registers with ReleaseCoordinator.shared
    private let bytesPerRender: Int

    init(bytesPerRender: Int) {
        self.bytesPerRender = bytesPerRender
        cache.name = "renders"  // the consumer's name in release reports and metrics
    }

    /// The report's page, from the cache or rendered now (and cached).
    func page(for id: Int) -> (page: ByteBuffer, hit: Bool) {
        if let page = cache.object(forKey: id) { return (page, true) }
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

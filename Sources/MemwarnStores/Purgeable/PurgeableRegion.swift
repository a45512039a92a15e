import MemwarnSystem
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// One region of a ``PurgeableArena``: `size` bytes mapped on their own, aligned to `size`,
/// so a block's region is its address with the low bits cleared.
///
/// The region's first bytes are its header; blocks follow it, packed one after another:
///
/// | offset | what | changed by |
/// |---|---|---|
/// | 0 | live pages: pages whose count is not zero (+1 while the arena allocates from the region) | atomics |
/// | 64 | live blocks touching each page, one `Int32` per page | atomics |
/// | after those | a bit per page: given back to the kernel (`MADV_DONTNEED`) | the arena, under its lock |
///
/// A page whose count is zero holds no live bytes. The region is unmapped when its live-page
/// count reaches zero. Counting pages rather than blocks at the region level means freeing a
/// block changes the region's count only when one of its pages empties: most frees are one or
/// two atomic decrements, not three.
struct PurgeableRegion: @unchecked Sendable {
    // @unchecked: a handle to shared memory: its header changes only by atomics or under the
    // arena's lock (the table above), and its blocks belong to the values holding them.
    let base: UnsafeMutableRawPointer
    let geometry: Geometry

    /// Sizes shared by every region of an arena.
    struct Geometry {
        let size: Int
        let pageSize: Int
        /// log2 of the page size.
        let pageShift: Int
        var pageCount: Int { size / pageSize }
        private static let pageCountsOffset = 64
        var pageCountsOffset: Int { Self.pageCountsOffset }
        var returnedBitsOffset: Int { Self.pageCountsOffset + pageCount * MemoryLayout<Int32>.stride }
        /// Where the first block starts: after the header, on a cache line.
        var firstBlockOffset: Int { (headerEnd + 63) & ~63 }
        private var headerEnd: Int { returnedBitsOffset + (pageCount + 63) / 64 * MemoryLayout<UInt64>.stride }
        /// The first page with no header bytes: pages before it are never given back.
        var firstReturnablePage: Int { (headerEnd + pageSize - 1) / pageSize }

        init(size: Int, pageSize: Int) {
            precondition(size > 0 && size & (size - 1) == 0, "a region's size must be a power of two")
            precondition(pageSize > 0 && pageSize & (pageSize - 1) == 0, "the page size must be a power of two")
            precondition(size % pageSize == 0 && size / pageSize >= 4, "a region must span at least four pages")
            self.size = size
            self.pageSize = pageSize
            pageShift = pageSize.trailingZeroBitCount
        }
    }

    /// The region that holds `block`.
    init(holding block: UnsafeRawPointer, geometry: Geometry) {
        base = UnsafeMutableRawPointer(bitPattern: UInt(bitPattern: block) & ~UInt(geometry.size - 1))!
        self.geometry = geometry
    }

    private init(base: UnsafeMutableRawPointer, geometry: Geometry) {
        self.base = base
        self.geometry = geometry
    }

    /// Maps a new region, aligned to its size and advised for transparent huge pages (so the
    /// kernel maps and unmaps it in 2 MiB pages where it can), with a live-page count of 1:
    /// the arena's own hold while it allocates from the region.
    ///
    /// - Returns: `nil` if the kernel refuses the mapping (`errno` says why).
    static func map(_ geometry: Geometry) -> PurgeableRegion? {
        guard let start = VirtualMemory.map(2 * geometry.size) else { return nil }
        // Map twice the size and trim both ends to the aligned middle.
        let address = UInt(bitPattern: start)
        let aligned = (address + UInt(geometry.size) - 1) & ~UInt(geometry.size - 1)
        VirtualMemory.unmap(start, Int(aligned - address))
        VirtualMemory.unmap(
            UnsafeMutableRawPointer(bitPattern: aligned + UInt(geometry.size)), Int(address + UInt(2 * geometry.size) - aligned - UInt(geometry.size)))
        let region = PurgeableRegion(base: UnsafeMutableRawPointer(bitPattern: aligned)!, geometry: geometry)
        VirtualMemory.adviseHugePages(region.base, geometry.size)
        region.base.bindMemory(to: Atomic<Int>.self, capacity: 1).initialize(to: Atomic(1))
        let pageCounts = (region.base + geometry.pageCountsOffset).bindMemory(to: Atomic<Int32>.self, capacity: geometry.pageCount)
        for page in 0..<geometry.pageCount { (pageCounts + page).initialize(to: Atomic(0)) }
        (region.base + geometry.returnedBitsOffset).initializeMemory(as: UInt64.self, repeating: 0, count: (geometry.pageCount + 63) / 64)
        return region
    }

    func unmap() { VirtualMemory.unmap(base, geometry.size) }

    private var livePages: UnsafeMutablePointer<Atomic<Int>> { base.assumingMemoryBound(to: Atomic<Int>.self) }
    private var pageCounts: UnsafeMutablePointer<Atomic<Int32>> { (base + geometry.pageCountsOffset).assumingMemoryBound(to: Atomic<Int32>.self) }
    private var returnedBits: UnsafeMutablePointer<UInt64> { (base + geometry.returnedBitsOffset).assumingMemoryBound(to: UInt64.self) }

    /// The first and last page a block of `byteCount` (≥ 1) bytes at `offset` touches.
    @inline(__always)
    private func pages(offset: Int, byteCount: Int) -> (first: Int, last: Int) {
        (offset &>> geometry.pageShift, (offset &+ byteCount &- 1) &>> geometry.pageShift)
    }

    /// Counts a new block at `offset` (called by the arena, under its lock).
    func retain(offset: Int, byteCount: Int) {
        let (first, last) = pages(offset: offset, byteCount: byteCount)
        for page in first...last where pageCounts[page].wrappingAdd(1, ordering: .relaxed).newValue == 1 {
            livePages.pointee.wrappingAdd(1, ordering: .relaxed)
        }
    }

    /// The first and last page of the region a block touches.
    func pages(of block: UnsafeRawPointer, byteCount: Int) -> (first: Int, last: Int) {
        pages(offset: block - UnsafeRawPointer(base), byteCount: byteCount)
    }

    /// Counts `blocks` blocks that touched `page` gone, leaving the region's live-page count
    /// to the caller.
    ///
    /// - Returns: whether the page is now empty: the caller must then drop one hold
    ///   (``dropHolds(_:)``), at once or later with others.
    func emptiesPage(releasing blocks: Int32, onPage page: Int) -> Bool {
        // Releasing: the blocks' bytes were last used before this, so a page seen free by
        // `returnFreePages` (acquiring) is no longer read or written by anyone. Acquiring too:
        // the thread that empties the page, and may go on to unmap the region, must see every
        // other thread's last use of the page's blocks.
        let remaining = pageCounts[page].wrappingSubtract(blocks, ordering: .acquiringAndReleasing).newValue
        precondition(remaining >= 0, "a purgeable block was released twice")
        return remaining == 0
    }

    /// Drops holds on the region (live pages', or the arena's own).
    ///
    /// - Returns: `true` when they were the last ones.
    func dropHolds(_ count: Int) -> Bool {
        let remaining = livePages.pointee.wrappingSubtract(count, ordering: .acquiringAndReleasing).newValue
        precondition(remaining >= 0, "a purgeable block was released twice")
        return remaining == 0
    }

    /// Gives back to the kernel every page below `limit` (a byte offset) that holds no live
    /// block and was not given back before (called by the arena, under its lock).
    ///
    /// - Returns: the bytes given back.
    func returnFreePages(below limit: Int) -> Int {
        var returned = 0
        var run: Range<Int>?
        func flush() {
            guard let pages = run else { return }
            if returned == 0 {
                // A region with holes is no longer worth a huge page, and khugepaged would
                // otherwise collapse it back into one (refilling the holes with zeros) as
                // long as one small page in it is still mapped. Advised first, so it cannot
                // do so in between.
                VirtualMemory.adviseNoHugePages(base, geometry.size)
            }
            VirtualMemory.discard(base + pages.lowerBound * geometry.pageSize, pages.count * geometry.pageSize)
            for page in pages { returnedBits[page / 64] |= 1 << UInt64(page % 64) }
            returned += pages.count * geometry.pageSize
            run = nil
        }
        // The header's pages are never free, and the page the arena is still filling is in use.
        let first = geometry.firstReturnablePage
        for page in first..<max(first, min(limit / geometry.pageSize, geometry.pageCount)) {
            let free = returnedBits[page / 64] & (1 << UInt64(page % 64)) == 0 && pageCounts[page].load(ordering: .acquiring) == 0
            if free {
                run = (run?.lowerBound ?? page)..<(page + 1)
            } else {
                flush()
            }
        }
        flush()
        return returned
    }
}

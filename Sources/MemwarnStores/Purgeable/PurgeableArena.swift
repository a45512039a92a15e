import MemwarnRelease
import MemwarnSystem
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Where ``PurgeableData`` keeps its bytes: memory memwarn maps itself, outside malloc's heap,
/// so that releasing purgeable content gives memory back to the kernel directly.
///
/// Apple's purgeable memory is virtual memory the system can take back; on Linux the nearest
/// thing is memory the process unmaps or discards itself. Blocks are packed one after another
/// into 2 MiB regions aligned to 2 MiB and advised for transparent huge pages:
///
/// - **Allocation** takes the arena's lock and moves a pointer: O(1), no search.
/// - **Freeing** takes no lock: it lowers the count of each page the block touched, and the
///   region's count of live pages when one empties (atomics). The thread that frees a region's
///   last block takes the lock to unmap the region, at once (a ``Deallocations`` batch, when it
///   moves on to another region or finishes); for a huge-page region that is one page table
///   entry for the kernel to drop, not 512.
/// - **``returnFreePages()``**, called by ``/MemwarnRelease/ReleaseCoordinator`` after every release (as it calls
///   `malloc_trim`), gives back with `MADV_DONTNEED` the pages of live regions that no live
///   block touches, and takes the huge-page advice back from those regions (so khugepaged
///   does not fill the holes again). Freed space inside a region is never reused: a region is
///   filled once and lives until its last block goes.
/// - **Large blocks** (over ``largeBlockThreshold``) get a mapping of their own, unmapped when
///   freed.
///
/// The cost of never reusing space is fragmentation in the worst case: a region whose every
/// page still has one live block keeps all its pages. A cache evicting least recently used
/// entries frees blocks in about the order they were allocated, which leaves whole pages and
/// whole regions free.
@usableFromInline
final class PurgeableArena: Sendable {
    /// The arena every ``PurgeableData`` uses; made at its first use, when it joins the memory
    /// returners that every release ends with (``/MemwarnRelease/ReleaseCoordinator/returnFreedMemory()``).
    @usableFromInline
    static let shared: PurgeableArena = {
        let arena = PurgeableArena()
        ReleaseCoordinator.addMemoryReturner { _ = arena.returnFreePages() }
        return arena
    }()

    let geometry: PurgeableRegion.Geometry
    /// Blocks larger than this get a mapping of their own: a 32nd of a region (64 KiB), so a
    /// region wastes less than 4 % at its end.
    let largeBlockThreshold: Int
    /// Blocks start on this alignment.
    static let alignment = 16

    struct State {
        /// The region being filled and the offset of its first free byte.
        var current: (region: PurgeableRegion, offset: Int)?
        /// Every mapped region, by base address (the current one included).
        var regions: [UInt: PurgeableRegion] = [:]
        var regionsUnmapped = 0
        var bytesReturned = 0
    }
    let state = Locked(State())
    let largeBlocks = Atomic<Int>(0)

    /// A snapshot of the arena's bookkeeping, for tests and diagnostics.
    struct Statistics: Equatable {
        var regions: Int
        var regionsUnmapped: Int
        var largeBlocks: Int
        /// Bytes given back by ``returnFreePages()`` since the arena was created.
        var bytesReturned: Int
    }

    init(regionSize: Int = 2 << 20, pageSize: Int = VirtualMemory.pageSize) {
        geometry = PurgeableRegion.Geometry(size: regionSize, pageSize: pageSize)
        largeBlockThreshold = regionSize / 32
    }

    deinit {
        state.withLock { state in
            for region in state.regions.values { region.unmap() }
        }
    }

    var statistics: Statistics {
        state.withLock {
            Statistics(
                regions: $0.regions.count, regionsUnmapped: $0.regionsUnmapped,
                largeBlocks: largeBlocks.load(ordering: .relaxed), bytesReturned: $0.bytesReturned)
        }
    }

    /// A block of `byteCount` bytes (not zeroed), to be freed with
    /// ``deallocate(_:byteCount:)`` with the same count.
    ///
    /// Traps if the kernel refuses a new mapping, as Swift does when `malloc` fails.
    func allocate(byteCount: Int) -> UnsafeMutableRawPointer {
        precondition(byteCount > 0, "a purgeable block holds at least one byte")
        if byteCount > largeBlockThreshold {
            guard let block = VirtualMemory.map(byteCount) else { Self.mappingFailed(byteCount) }
            if byteCount >= geometry.size { VirtualMemory.adviseHugePages(block, byteCount) }
            largeBlocks.wrappingAdd(1, ordering: .relaxed)
            return block
        }
        let rounded = (byteCount + Self.alignment - 1) & ~(Self.alignment - 1)
        return state.withLock { state in
            if state.current == nil || state.current!.offset + rounded > geometry.size {
                if let full = state.current?.region, full.dropHolds(1) { forget(full, in: &state) }
                guard let region = PurgeableRegion.map(geometry) else { Self.mappingFailed(geometry.size) }
                state.regions[UInt(bitPattern: region.base)] = region
                state.current = (region, geometry.firstBlockOffset)
            }
            let (region, offset) = state.current!
            region.retain(offset: offset, byteCount: byteCount)
            state.current!.offset += rounded
            return region.base + offset
        }
    }

    /// Frees a block from ``allocate(byteCount:)``: a batch of one. Any thread, no lock
    /// unless the block was its region's last.
    func deallocate(_ block: UnsafeMutableRawPointer, byteCount: Int) {
        var batch = deallocations()
        batch.add(block, byteCount: byteCount)
        batch.finish()
    }

    /// Frees many blocks, counting them page by page: blocks freed one after another in the
    /// order they were allocated share pages and regions, so one atomic subtraction covers
    /// several blocks of a page, and one the emptied pages of a region.
    ///
    /// A page's count drops when the batch moves on to another page, and a region's live-page
    /// count when it moves on to another region. Call ``finish()`` when done: a batch dropped
    /// without it leaves its last page counted and its last region mapped for good.
    @usableFromInline
    struct Deallocations {
        let arena: PurgeableArena
        /// The page being counted (its region and its index) and its blocks so far, and the
        /// pages of that region emptied so far.
        private var region: PurgeableRegion?
        private var page = 0
        private var blocks: Int32 = 0
        private var emptiedPages = 0

        init(arena: PurgeableArena) { self.arena = arena }

        /// Counts a block from ``PurgeableArena/allocate(byteCount:)`` freed.
        @usableFromInline
        mutating func add(_ block: UnsafeMutableRawPointer, byteCount: Int) {
            guard byteCount <= arena.largeBlockThreshold else {
                VirtualMemory.unmap(block, byteCount)
                arena.largeBlocks.wrappingSubtract(1, ordering: .relaxed)
                return
            }
            let blockRegion = PurgeableRegion(holding: block, geometry: arena.geometry)
            let (first, last) = blockRegion.pages(of: block, byteCount: byteCount)
            if region?.base != blockRegion.base {
                finishRegion()
                region = blockRegion
            }
            for page in first...last {
                if blocks > 0, page == self.page {
                    blocks += 1
                } else {
                    finishPage()
                    self.page = page
                    blocks = 1
                }
            }
        }

        /// Frees what was counted.
        @usableFromInline
        mutating func finish() { finishRegion() }

        private mutating func finishPage() {
            guard blocks > 0, let region else { return }
            if region.emptiesPage(releasing: blocks, onPage: page) { emptiedPages += 1 }
            blocks = 0
        }

        private mutating func finishRegion() {
            finishPage()
            guard emptiedPages > 0, let region else { return }
            if region.dropHolds(emptiedPages) {
                arena.state.withLock { arena.forget(region, in: &$0) }
            }
            emptiedPages = 0
        }
    }

    /// A batch of frees (see ``Deallocations``).
    func deallocations() -> Deallocations { Deallocations(arena: self) }

    /// The arena's lane in a `DiscardBatch`: the blocks of the purgeable data discarded into
    /// the batch, freed page by page as ``Deallocations`` frees them, finished with the batch.
    final class DeallocationLane: DiscardBatchLane {
        // Unchecked: the lane belongs to one batch, which is one release's, on one thread; a
        // checked access would cost a runtime call per block freed.
        @exclusivity(unchecked) private var deallocations: Deallocations

        init(_ arena: PurgeableArena) { deallocations = arena.deallocations() }

        func add(_ block: UnsafeMutableRawPointer, byteCount: Int) {
            deallocations.add(block, byteCount: byteCount)
        }

        func finish() { deallocations.finish() }
    }

    /// Gives back to the kernel every page that holds no live block.
    ///
    /// - Returns: the bytes given back by this call.
    @discardableResult
    func returnFreePages() -> Int {
        state.withLock { state in
            var returned = 0
            for region in state.regions.values {
                let isCurrent = state.current?.region.base == region.base
                returned += region.returnFreePages(below: isCurrent ? state.current!.offset : geometry.size)
            }
            state.bytesReturned += returned
            return returned
        }
    }

    func forget(_ region: PurgeableRegion, in state: inout State) {
        state.regions[UInt(bitPattern: region.base)] = nil
        state.regionsUnmapped += 1
        region.unmap()
    }

    private static func mappingFailed(_ byteCount: Int) -> Never {
        fatalError("memwarn's purgeable arena could not map \(byteCount) bytes: \(String(cString: strerror(errno)))")
    }
}

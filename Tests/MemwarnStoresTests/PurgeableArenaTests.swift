import Glibc
import MemwarnRelease
import MemwarnSystem
import Testing

@testable import MemwarnStores

/// The purgeable arena on real memory: blocks packed into regions, regions unmapped with their
/// last block, free pages given back to the kernel (checked with `mincore`, the kernel's own
/// answer to "is this page resident"), and frees from many threads at once. Each test uses an
/// arena of its own; `PurgeableArena.shared` is left to `PurgeableData`.
@Suite("PurgeableArena")
struct PurgeableArenaTests {
    static let page = VirtualMemory.pageSize

    /// Whether each page of `[start, start + byteCount)` is resident, from `mincore`.
    static func residentPages(_ start: UnsafeMutableRawPointer, _ byteCount: Int) throws -> [Bool] {
        var vector = [UInt8](repeating: 0, count: (byteCount + page - 1) / page)
        guard mincore(start, byteCount, &vector) == 0 else {
            throw CheckFailure("mincore failed: \(String(cString: strerror(errno)))")
        }
        return vector.map { $0 & 1 == 1 }
    }

    struct CheckFailure: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }

    static func fill(_ block: UnsafeMutableRawPointer, _ byteCount: Int, with byte: UInt8) {
        block.initializeMemory(as: UInt8.self, repeating: byte, count: byteCount)
    }

    static func holds(_ block: UnsafeMutableRawPointer, _ byteCount: Int, _ byte: UInt8) -> Bool {
        UnsafeRawBufferPointer(start: block, count: byteCount).allSatisfy { $0 == byte }
    }

    @Test func blocksArePackedOneAfterAnotherInAnAlignedRegion() {
        let arena = PurgeableArena()
        let sizes = [1, 17, 1_000, 4_096, 5]
        let blocks = sizes.map { arena.allocate(byteCount: $0) }
        defer { for (block, size) in zip(blocks, sizes) { arena.deallocate(block, byteCount: size) } }

        let regionBase = UInt(bitPattern: blocks[0]) & ~UInt(arena.geometry.size - 1)
        #expect(blocks.allSatisfy { UInt(bitPattern: $0) & ~UInt(arena.geometry.size - 1) == regionBase })
        #expect(UInt(bitPattern: blocks[0]) - regionBase == UInt(arena.geometry.firstBlockOffset))
        for (block, next) in zip(zip(blocks, sizes), blocks.dropFirst()) {
            let rounded = (block.1 + PurgeableArena.alignment - 1) / PurgeableArena.alignment * PurgeableArena.alignment
            #expect(next - block.0 == rounded)
        }
        for (index, (block, size)) in zip(blocks, sizes).enumerated() { Self.fill(block, size, with: UInt8(index + 1)) }
        #expect(zip(blocks, sizes).enumerated().allSatisfy { Self.holds($1.0, $1.1, UInt8($0 + 1)) })
        #expect(arena.statistics == .init(regions: 1, regionsUnmapped: 0, largeBlocks: 0, bytesReturned: 0))
    }

    @Test func aFullRegionIsUnmappedWithItsLastBlockAndTheCurrentOneStays() {
        let arena = PurgeableArena()
        let size = 64 << 10
        var first: [UnsafeMutableRawPointer] = []
        // Fill the first region until the arena has to start a second.
        while arena.statistics.regions < 2 {
            let block = arena.allocate(byteCount: size)
            Self.fill(block, size, with: 7)
            first.append(block)
        }
        let second = first.removeLast()  // the block that opened the second region
        #expect(first.count == (arena.geometry.size - arena.geometry.firstBlockOffset) / size)

        for block in first.dropLast() { arena.deallocate(block, byteCount: size) }
        #expect(arena.statistics.regions == 2)  // one block still holds the first region
        arena.deallocate(first.last!, byteCount: size)
        #expect(arena.statistics.regions == 1)
        #expect(arena.statistics.regionsUnmapped == 1)

        // The current region is kept even when empty: the next block goes there.
        arena.deallocate(second, byteCount: size)
        #expect(arena.statistics.regions == 1)
        let next = arena.allocate(byteCount: size)
        #expect(next - second == size)
        arena.deallocate(next, byteCount: size)
    }

    @Test func freePagesGoBackToTheKernelAndLivePagesKeepTheirBytes() throws {
        let arena = PurgeableArena()
        let size = 10_000  // a multiple of the alignment, spanning three or four pages
        let blocks = (0..<40).map { index in
            let block = arena.allocate(byteCount: size)
            Self.fill(block, size, with: UInt8(index + 1))
            return block
        }
        let base = UnsafeMutableRawPointer(bitPattern: UInt(bitPattern: blocks[0]) & ~UInt(arena.geometry.size - 1))!
        let used = blocks[39] + size - base
        #expect(try Self.residentPages(base, used).allSatisfy { $0 })

        for block in blocks[10..<30] { arena.deallocate(block, byteCount: size) }
        let freedStart = blocks[10] - base
        let freedEnd = blocks[30] - base
        let firstFreePage = (freedStart + Self.page - 1) / Self.page
        let endFreePage = freedEnd / Self.page
        let returned = arena.returnFreePages()

        #expect(returned == (endFreePage - firstFreePage) * Self.page)
        let resident = try Self.residentPages(base, used)
        #expect(resident[firstFreePage..<endFreePage].allSatisfy { !$0 })
        #expect(resident[..<firstFreePage].allSatisfy { $0 })
        #expect(resident[endFreePage...].allSatisfy { $0 })
        for index in Array(0..<10) + Array(30..<40) {
            #expect(Self.holds(blocks[index], size, UInt8(index + 1)), "block \(index) lost its bytes")
        }
        #expect(arena.returnFreePages() == 0)  // nothing new to give back
        #expect(arena.statistics.bytesReturned == returned)
        for block in blocks[..<10] + blocks[30...] { arena.deallocate(block, byteCount: size) }
    }

    @Test func aBatchOfFreesCountsPageByPageAndUnmapsRegionsAsItGoes() throws {
        let arena = PurgeableArena()
        let size = 10_000
        var blocks: [UnsafeMutableRawPointer] = []
        func allocate() {
            let block = arena.allocate(byteCount: size)
            Self.fill(block, size, with: UInt8(truncatingIfNeeded: blocks.count))
            blocks.append(block)
        }
        while arena.statistics.regions < 3 { allocate() }
        for _ in 0..<8 { allocate() }  // the third region: 9 blocks, of which the last 5 are kept
        let large = arena.allocate(byteCount: arena.largeBlockThreshold + 1)
        let kept = blocks.suffix(5)

        var batch = arena.deallocations()
        for block in blocks.dropLast(5) { batch.add(block, byteCount: size) }
        batch.add(large, byteCount: arena.largeBlockThreshold + 1)
        // The first two regions emptied as the batch moved past them; a large block goes at once.
        #expect(arena.statistics.regionsUnmapped == 2)
        #expect(arena.statistics.largeBlocks == 0)
        batch.finish()
        #expect(arena.statistics.regions == 1)

        // The third region's freed pages are free: whole pages of them go back to the kernel.
        let base = UnsafeMutableRawPointer(bitPattern: UInt(bitPattern: kept.first!) & ~UInt(arena.geometry.size - 1))!
        let firstKeptPage = (kept.first! - base) / Self.page
        let returned = arena.returnFreePages()
        #expect(returned == (firstKeptPage - 1) * Self.page)  // pages 1 up to the first kept block's
        for (index, block) in zip(kept.indices, kept) {
            #expect(Self.holds(block, size, UInt8(truncatingIfNeeded: index)), "block \(index) lost its bytes")
            arena.deallocate(block, byteCount: size)
        }
    }

    @Test func thePageTheArenaIsFillingIsNotGivenBack() throws {
        let arena = PurgeableArena()
        // A block over pages 0–2, then a small one in the middle of page 2: the arena goes on
        // filling page 2.
        let large = arena.allocate(byteCount: 10_000)
        let small = arena.allocate(byteCount: 64)
        let base = UnsafeMutableRawPointer(bitPattern: UInt(bitPattern: large) & ~UInt(arena.geometry.size - 1))!
        let fillingPage = (small + 64 - base) / Self.page
        #expect(fillingPage == 2)
        Self.fill(large, 10_000, with: 1)
        Self.fill(small, 64, with: 2)
        arena.deallocate(large, byteCount: 10_000)
        arena.deallocate(small, byteCount: 64)
        // Everything allocated is free; only page 1 goes back: page 0 holds the header, and
        // page 2 the region's next block.
        #expect(arena.returnFreePages() == Self.page)
        let resident = try Self.residentPages(base, 3 * Self.page)
        #expect(!resident[1])
        #expect(resident[2])
        let next = arena.allocate(byteCount: 64)
        #expect((next - base) / Self.page == fillingPage)
        Self.fill(next, 64, with: 3)
        #expect(Self.holds(next, 64, 3))
        arena.deallocate(next, byteCount: 64)
    }

    @Test func largeBlocksGetAMappingOfTheirOwn() throws {
        let arena = PurgeableArena()
        let size = arena.largeBlockThreshold + 1
        let block = arena.allocate(byteCount: size)
        #expect(UInt(bitPattern: block) % UInt(Self.page) == 0)
        #expect(arena.statistics.largeBlocks == 1)
        #expect(arena.statistics.regions == 0)
        Self.fill(block, size, with: 3)
        #expect(try Self.residentPages(block, size).allSatisfy { $0 })
        arena.deallocate(block, byteCount: size)
        #expect(arena.statistics.largeBlocks == 0)
    }

    /// Tasks allocate, write, check and free blocks of varied sizes while another task keeps
    /// giving free pages back; a page given back under a live block would zero its bytes.
    @Test func concurrentAllocationsFreesAndReturnsKeepEveryLiveBlockIntact() async {
        let arena = PurgeableArena(regionSize: 256 << 10)  // small regions: many retire and unmap
        let workers = 8
        let rounds = 2_000
        let corrupt = await withTaskGroup(of: Int.self) { group in
            for worker in 0..<workers {
                group.addTask {
                    var corrupt = 0
                    var live: [(UnsafeMutableRawPointer, Int, UInt8)] = []
                    for round in 0..<rounds {
                        let size = 1 + (round &* 7_919 &+ worker &* 104_729) % 12_000
                        let byte = UInt8(truncatingIfNeeded: round &+ worker) | 1  // never 0: a page given back reads as 0
                        let block = arena.allocate(byteCount: size)
                        Self.fill(block, size, with: byte)
                        live.append((block, size, byte))
                        if live.count > 16 {
                            let (old, oldSize, oldByte) = live.removeFirst()
                            if !Self.holds(old, oldSize, oldByte) { corrupt += 1 }
                            arena.deallocate(old, byteCount: oldSize)
                        }
                    }
                    for (block, size, byte) in live {
                        if !Self.holds(block, size, byte) { corrupt += 1 }
                        arena.deallocate(block, byteCount: size)
                    }
                    return corrupt
                }
            }
            group.addTask {
                for _ in 0..<200 {
                    arena.returnFreePages()
                    await Task.yield()
                }
                return 0
            }
            return await group.reduce(0, +)
        }
        #expect(corrupt == 0)
        let statistics = arena.statistics
        #expect(statistics.regions == 1, "only the region being filled should be left: \(statistics)")
        #expect(statistics.regionsUnmapped > 0)
        #expect(statistics.largeBlocks == 0)
    }
}

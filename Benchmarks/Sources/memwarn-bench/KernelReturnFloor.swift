import MemwarnTestKit
#if canImport(Glibc)
import Glibc
#endif

/// The floors under the release benchmark, measured in this process beside it:
/// - what it costs the kernel alone to take back 1 GiB of touched anonymous memory (`munmap`),
///   on 4 KiB pages and on 2 MiB transparent huge pages, whatever frees it;
/// - what plain C costs for the same 1,000,000 entry sizes: `malloc` each, then `free` each
///   in allocation order and `malloc_trim(0)` (timed together), with no Swift and no cache.
struct KernelReturnFloor {
    var smallPagesNanoseconds: [UInt64]
    var hugePagesNanoseconds: [UInt64]
    /// `AnonHugePages` of the huge-page mapping just before it was unmapped (0: THP refused).
    var hugePagesBacked: Int
    var mallocFreeNanoseconds: [UInt64]

    static let bytes = 1 << 30
    static let hugePage = 2 << 20

    static func measure(runs: Int, sizes: [Int], trim: (@convention(c) (UInt) -> Int32)?) throws -> KernelReturnFloor {
        var small: [UInt64] = [], huge: [UInt64] = [], mallocFree: [UInt64] = []
        var backed = 0
        for _ in 0..<runs {
            small.append(try unmapTouched(hugePages: false).nanoseconds)
            let (nanoseconds, hugeBytes) = try unmapTouched(hugePages: true)
            huge.append(nanoseconds)
            backed = hugeBytes
            mallocFree.append(try freeInOrder(sizes: sizes, trim: trim))
        }
        return KernelReturnFloor(smallPagesNanoseconds: small, hugePagesNanoseconds: huge, hugePagesBacked: backed,
                                 mallocFreeNanoseconds: mallocFree)
    }

    /// Mallocs and fills a block of each size, then times freeing them all in allocation order
    /// plus `malloc_trim(0)`.
    private static func freeInOrder(sizes: [Int], trim: (@convention(c) (UInt) -> Int32)?) throws -> UInt64 {
        var blocks: [UnsafeMutableRawPointer] = []
        blocks.reserveCapacity(sizes.count)
        for (index, size) in sizes.enumerated() {
            guard let block = malloc(size) else { throw BenchmarkError("malloc(\(size)) failed") }
            memset(block, Int32(truncatingIfNeeded: index), size)
            blocks.append(block)
        }
        let start = ChildProcess.monotonicNanoseconds()
        for block in blocks { free(block) }
        _ = trim?(0)
        return ChildProcess.monotonicNanoseconds() - start
    }

    /// Maps 1 GiB (2 MiB-aligned), touches every page, and times `munmap`.
    private static func unmapTouched(hugePages: Bool) throws -> (nanoseconds: UInt64, hugeBytes: Int) {
        let length = bytes + hugePage
        guard let mapping = mmap(nil, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0), mapping != MAP_FAILED else {
            throw BenchmarkError("mmap of \(length) bytes failed: errno \(errno)")
        }
        let aligned = UnsafeMutableRawPointer(bitPattern: (UInt(bitPattern: mapping) + UInt(hugePage - 1)) & ~UInt(hugePage - 1))!
        if hugePages, madvise(aligned, bytes, MADV_HUGEPAGE) != 0 {
            munmap(mapping, length)
            throw BenchmarkError("madvise(MADV_HUGEPAGE) failed: errno \(errno)")
        }
        memset(aligned, 1, bytes)
        let hugeBytes = anonymousHugePageBytes()
        let start = ChildProcess.monotonicNanoseconds()
        munmap(mapping, length)
        return (ChildProcess.monotonicNanoseconds() - start, hugeBytes)
    }
}

/// `AnonHugePages` of `/proc/self/smaps_rollup` in bytes: this process's anonymous memory on
/// transparent huge pages (0 when unreadable).
func anonymousHugePageBytes() -> Int { procBytes("/proc/self/smaps_rollup", key: "AnonHugePages") }

import CLinuxCalls

#if canImport(Glibc)
import Glibc
#endif

/// The few `mmap` family calls the purgeable arena makes, with their failures spelled out.
package enum VirtualMemory {
    /// The kernel's page size.
    package static let pageSize = Int(sysconf(Int32(_SC_PAGESIZE)))

    /// Maps `byteCount` bytes of private, zero-filled memory.
    ///
    /// - Returns: `nil` when the kernel refuses (`errno` says why).
    package static func map(_ byteCount: Int) -> UnsafeMutableRawPointer? {
        let start = mmap(nil, byteCount, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
        return start == MAP_FAILED ? nil : start
    }

    /// Unmaps memory mapped by ``map(_:)``; a zero length does nothing.
    package static func unmap(_ start: UnsafeMutableRawPointer?, _ byteCount: Int) {
        guard let start, byteCount > 0 else { return }
        // munmap fails only for arguments that are not a mapping's page-aligned range: a bug here.
        precondition(munmap(start, byteCount) == 0, "munmap(\(start), \(byteCount)) failed: \(String(cString: strerror(errno)))")
    }

    /// Gives the pages back to the kernel at once (`MADV_DONTNEED`): the range stays mapped
    /// and reads as zeros, and the cgroup's usage drops now rather than under pressure, which
    /// is what `MADV_FREE` would do.
    package static func discard(_ start: UnsafeMutableRawPointer, _ byteCount: Int) {
        precondition(madvise(start, byteCount, MADV_DONTNEED) == 0, "madvise(MADV_DONTNEED) failed: \(String(cString: strerror(errno)))")
    }

    /// Asks for transparent huge pages. Only advice: a kernel with huge pages off, or none
    /// free, uses small pages, so the result is ignored.
    package static func adviseHugePages(_ start: UnsafeMutableRawPointer, _ byteCount: Int) {
        _ = madvise(start, byteCount, MADV_HUGEPAGE)
    }

    /// Withdraws ``adviseHugePages(_:_:)``: the range stays on small pages, and khugepaged
    /// leaves it alone. Advice too, so the result is ignored.
    package static func adviseNoHugePages(_ start: UnsafeMutableRawPointer, _ byteCount: Int) {
        _ = madvise(start, byteCount, MADV_NOHUGEPAGE)
    }
}

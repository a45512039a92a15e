import CLinuxCalls

#if canImport(Glibc)
import Glibc
#endif

/// This process's memory as it sees it: what is resident, and what its heap holds in use.
///
/// The two differ by what the allocator keeps: freed blocks it has not returned to the kernel
/// count as resident but not as in use. `memwarn soak` compares them to tell memory the allocator
/// retains from memory the program still holds.
package struct ProcessMemory: Sendable, Hashable {
    /// Resident memory (`/proc/self/statm`'s second field, in pages).
    package var residentBytes: UInt64
    /// Heap blocks in use: malloc's allocated chunks in every arena plus its mmapped chunks
    /// (`mallinfo2`'s `uordblks + hblkhd`; `mallinfo` before glibc 2.33), or `nil` when glibc's
    /// malloc is not the process's allocator (jemalloc, tcmalloc or a sanitizer's, which leave
    /// glibc's counts at 0).
    package var heapInUseBytes: UInt64?

    /// Reads both now; `nil` when `/proc/self/statm` cannot be read.
    ///
    /// - Returns: the figures, or `nil`.
    /// - Complexity: a read of one small file, and a walk of malloc's arenas and their free lists
    ///   (each arena locked meanwhile): call it now and then (the control endpoint's `status`),
    ///   not on a hot path.
    package static func current() -> ProcessMemory? {
        guard let text = statm(), let field = text.split(separator: " ").dropFirst().first, let pages = UInt64(field) else { return nil }
        let heap = memwarn_heap_in_use_bytes()
        return ProcessMemory(residentBytes: pages * UInt64(VirtualMemory.pageSize), heapInUseBytes: heap == 0 ? nil : heap)
    }

    private static func statm() -> String? {
        let descriptor = Glibc.open("/proc/self/statm", O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var buffer = [UInt8](repeating: 0, count: 256)
        let count = buffer.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
        guard count > 0 else { return nil }
        return String(decoding: buffer.prefix(count), as: UTF8.self)
    }

    /// - Parameters:
    ///   - residentBytes: resident memory.
    ///   - heapInUseBytes: heap blocks in use.
    package init(residentBytes: UInt64, heapInUseBytes: UInt64?) {
        self.residentBytes = residentBytes
        self.heapInUseBytes = heapInUseBytes
    }
}

extension ProcessMemory {
    /// Whether glibc's malloc serves this process, as far as a sanitizer can tell: not when the
    /// thread or address sanitizer interposes its own (which leaves glibc's counts at 0). Tests
    /// use it to expect a heap figure or none.
    package static var glibcMallocIsTheAllocator: Bool {
        dlsym(UnsafeMutableRawPointer(bitPattern: 0), "__tsan_init") == nil && dlsym(UnsafeMutableRawPointer(bitPattern: 0), "__asan_init") == nil
    }
}

import CLinuxCalls
#if canImport(Glibc)
import Glibc
#endif

/// This process's memory as it sees it: what is resident, and what its heap holds in use.
///
/// The two differ by what the allocator keeps: freed blocks it has not returned to the kernel
/// count as resident but not as in use. `memwarn soak` compares them to tell memory the allocator
/// retains from memory the program still holds.
public struct ProcessMemory: Sendable, Hashable {
    /// Resident memory (`/proc/self/statm`'s second field, in pages).
    public var residentBytes: UInt64
    /// Heap blocks in use: malloc's allocated chunks in every arena plus its mmapped chunks
    /// (`mallinfo2`'s `uordblks + hblkhd`).
    public var heapInUseBytes: UInt64

    /// Reads both now; `nil` when `/proc/self/statm` cannot be read.
    ///
    /// - Returns: the figures, or `nil`.
    /// - Complexity: a read of one small file, and a walk of malloc's arenas and their free lists
    ///   (each arena locked meanwhile): call it now and then (the control endpoint's `status`),
    ///   not on a hot path.
    public static func current() -> ProcessMemory? {
        guard let text = statm(), let field = text.split(separator: " ").dropFirst().first, let pages = UInt64(field) else { return nil }
        return ProcessMemory(residentBytes: pages * UInt64(sysconf(Int32(_SC_PAGESIZE))), heapInUseBytes: memwarn_heap_in_use_bytes())
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
    public init(residentBytes: UInt64, heapInUseBytes: UInt64) {
        self.residentBytes = residentBytes
        self.heapInUseBytes = heapInUseBytes
    }
}

import CLinuxCalls

#if canImport(Glibc)
import Glibc
#endif

/// malloc's heap (glibc's allocator), not a priority queue: swift-collections' `Heap` is that.
package enum MallocHeap {
    /// Gives the heap's free memory back to the kernel (`malloc_trim(0)`): the top of each
    /// arena, and every free page inside one. It walks malloc's free lists, a few milliseconds
    /// for a gigabyte.
    ///
    /// - Returns: whether any memory went back.
    @discardableResult
    package static func trim() -> Bool {
        malloc_trim(0) == 1
    }
}

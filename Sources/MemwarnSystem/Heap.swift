import CLinuxCalls

#if canImport(Glibc)
import Glibc
#endif

/// malloc's heap.
package enum Heap {
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

import CLinuxCalls

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
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

    /// Resizes a block made by this function (`nil`: makes one), as `realloc` does: in place when
    /// it can, else moved, its bytes kept; a large block is moved without copying its pages
    /// (glibc maps those, and `mremap`s them). Aligned as malloc aligns: two words. Traps when
    /// memory runs out, as Swift's own allocations do.
    ///
    /// - Parameters:
    ///   - block: the block, or `nil`.
    ///   - byteCount: its new size.
    /// - Returns: the block, perhaps at a new address (the old one is then invalid).
    package static func reallocate(_ block: UnsafeMutableRawPointer?, byteCount: Int) -> UnsafeMutableRawPointer {
        guard let resized = realloc(block, byteCount) else { fatalError("out of memory: a block of \(byteCount) bytes") }
        return resized
    }

    /// Frees a block made by ``reallocate(_:byteCount:)``.
    package static func free(_ block: UnsafeMutableRawPointer) {
        #if canImport(Glibc)
        Glibc.free(block)
        #elseif canImport(Musl)
        Musl.free(block)
        #endif
    }
}

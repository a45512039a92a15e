import MemwarnSystem

/// A growable array of a cache's per-slot records (its nodes, its values), in memory of its
/// own, grown with `realloc` where the element allows it.
///
/// A Swift `Array` grows by allocating a buffer twice the size, copying its elements over and
/// freeing the old one, and checks that its buffer is not shared on every change. `realloc`
/// extends a block in place when it can, and moves a large one (glibc maps those) to a larger
/// mapping without copying its pages (`mremap`). Measured on fills of 20,000 entries (five
/// processes, 301 fills each, interleaved with a locked dictionary's): a set went from 1.71× to
/// 1.52× the locked dictionary's. The peak resident memory of a growing cache did not change
/// (83, 306 and 604 MiB for 1, 4 and 8 million `Int` entries, before and after): the index's
/// own growth sets it.
///
/// Elements that cannot be moved bit for bit (a struct holding a `weak` reference), or that need
/// more than malloc's alignment (two words), are moved one by one into a new buffer instead.
///
/// Not thread-safe: the cache's lock guards it as it guards the rest of ``CacheStorage``.
@usableFromInline
struct SlotBuffer<Element>: ~Copyable {
    @usableFromInline var base: UnsafeMutablePointer<Element>?
    /// The initialized elements, from `base`.
    @usableFromInline var count = 0
    /// The elements the buffer has room for.
    @usableFromInline var capacity = 0

    @inlinable
    init() {}

    @inlinable
    deinit {
        guard let base else { return }
        base.deinitialize(count: count)
        Self.free(base)
    }

    /// Whether the buffer is grown with `realloc`: the element moves bit for bit, and malloc's
    /// alignment suffices (two words: 16 bytes on 64-bit systems, 8 on some 32-bit ones).
    @inlinable
    static var growsInPlace: Bool {
        _isBitwiseTakable(Element.self) && MemoryLayout<Element>.alignment <= 2 * MemoryLayout<Int>.size
    }

    @inlinable
    var indices: Range<Int> { 0..<count }

    @inlinable
    subscript(slot: Int) -> Element {
        unsafeAddress {
            precondition(slot >= 0 && slot < count, "slot out of range")
            return UnsafePointer(base.unsafelyUnwrapped + slot)
        }
        unsafeMutableAddress {
            precondition(slot >= 0 && slot < count, "slot out of range")
            return base.unsafelyUnwrapped + slot
        }
    }

    /// Adds an element at the end, growing the buffer (to twice its size) when it is full.
    ///
    /// - Complexity: O(1) amortized; a growth in place moves no element.
    @inlinable
    mutating func append(_ element: consuming Element) {
        if count == capacity { grow() }
        (base.unsafelyUnwrapped + count).initialize(to: element)
        count += 1
    }

    /// Removes and returns the last element (`nil` when empty).
    @inlinable
    mutating func popLast() -> Element? {
        guard count > 0 else { return nil }
        count -= 1
        return (base.unsafelyUnwrapped + count).move()
    }

    /// Destroys every element, last first, and frees the buffer.
    ///
    /// Element by element, in code specialized for the element's type (a check or two each):
    /// destroying the whole buffer at once goes through the runtime's generic value witnesses,
    /// several calls an element (about 10 ms for a million nodes).
    @inlinable
    mutating func removeAll() {
        while popLast() != nil {}
        if let base { Self.free(base) }
        base = nil
        capacity = 0
    }

    /// Calls `body` with the elements.
    @inlinable
    func withUnsafeBufferPointer<Result>(_ body: (UnsafeBufferPointer<Element>) throws -> Result) rethrows -> Result {
        try body(UnsafeBufferPointer(start: base, count: count))
    }

    /// Calls `body` with the elements, to change them in place (not to add or remove any).
    @inlinable
    mutating func withUnsafeMutableBufferPointer<Result>(_ body: (UnsafeMutableBufferPointer<Element>) throws -> Result) rethrows -> Result {
        try body(UnsafeMutableBufferPointer(start: base, count: count))
    }

    /// Doubles the room (16 elements at first).
    @usableFromInline
    mutating func grow() {
        let newCapacity = max(16, capacity * 2)
        let (bytes, overflow) = newCapacity.multipliedReportingOverflow(by: MemoryLayout<Element>.stride)
        precondition(!overflow, "a cache's slots outgrew the address space")
        if Self.growsInPlace {
            base = MallocHeap.reallocate(base, byteCount: bytes).bindMemory(to: Element.self, capacity: newCapacity)
        } else {
            let grown = UnsafeMutablePointer<Element>.allocate(capacity: newCapacity)
            if let base {
                grown.moveInitialize(from: base, count: count)
                Self.free(base)
            }
            base = grown
        }
        capacity = newCapacity
    }

    /// Frees a buffer made by ``grow()``.
    @usableFromInline
    static func free(_ buffer: UnsafeMutablePointer<Element>) {
        if growsInPlace {
            MallocHeap.free(buffer)
        } else {
            buffer.deallocate()
        }
    }
}

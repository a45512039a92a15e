extension CacheStorage {
    /// How many entries ahead a release prefetches the value it will free.
    @inlinable
    static var prefetchDistance: Int { 16 }

    /// Whether a value may hold a heap object whose address is its first word (a class
    /// reference, an `Array`): values with no heap object (`_isPOD`) have nothing to free.
    @inlinable
    static var valuesMayOwnHeapObjects: Bool {
        !_isPOD(Value.self) && MemoryLayout<Value?>.size >= MemoryLayout<UInt>.size
    }

    /// Starts loading the heap object of the value in a slot, so that freeing it a few
    /// entries later does not wait for memory.
    ///
    /// Freeing many separately allocated values is bound by memory latency, not work: each
    /// `free` first reads the object's header, a cache miss of ~100 ns. The first word of a
    /// value with a heap object is that object's address; for any other value the prefetch
    /// is a harmless no-op (a prefetch never faults).
    @inlinable
    static func prefetchValue(in values: UnsafeBufferPointer<Value?>, slot: Int) {
        guard valuesMayOwnHeapObjects, let base = values.baseAddress, slot < values.count else { return }
        prefetchForRelease(UnsafeRawPointer(base).load(fromByteOffset: slot * MemoryLayout<Value?>.stride, as: UInt.self))
    }

    /// Starts loading the content object in a slot of the side array, so that asking it
    /// about its content a few slots later does not wait for memory.
    @inlinable
    static func prefetchContent(in contents: UnsafeBufferPointer<ContentReference?>, slot: Int) {
        guard slot < contents.count, let reference = contents[slot] else { return }
        prefetchForRelease(UInt(bitPattern: reference.objectAddress))
    }

    /// Drops every slot's value in slot order, each prefetched ``prefetchDistance`` slots
    /// ahead, so the CPU overlaps the cache misses (measured once, on a noisy machine: freeing
    /// 1 GiB in 1,000,000 entries, before the trim, went from 195 to 158 ms). The nodes stay,
    /// valueless.
    ///
    /// - Complexity: O(n).
    @inlinable
    mutating func releaseValuesInSlotOrder() {
        guard Self.valuesMayOwnHeapObjects else { return }
        values.withUnsafeMutableBufferPointer { buffer in
            let values = UnsafeBufferPointer(buffer)
            for slot in buffer.indices {
                Self.prefetchValue(in: values, slot: slot + Self.prefetchDistance)
                buffer[slot] = nil
            }
        }
    }
}

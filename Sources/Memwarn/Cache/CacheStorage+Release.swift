public import HeapModule

extension CacheStorage {
    /// The cost of entries whose content was already discarded.
    ///
    /// - Complexity: O(n) when discardable content is stored, else O(1).
    @inlinable
    var discardedCost: Int {
        guard discardableCount > 0 else { return 0 }
        var sum = 0
        contents.withUnsafeBufferPointer { contents in
            for slot in contents.indices {
                Self.prefetchContent(in: contents, slot: slot + Self.prefetchDistance)
                if contents[slot]?.isContentDiscarded() == true { sum += nodes[slot].cost }
            }
        }
        return sum
    }

    /// Removes the entries whose content was discarded.
    ///
    /// - Returns: the cost freed and, when `keepingValues`, the removed values.
    @inlinable
    mutating func releaseDiscarded(keepingValues: Bool) -> (freed: Int, values: [Value]) {
        var freed = 0
        var values: [Value] = []
        guard discardableCount > 0 else { return (0, []) }
        for slot in contents.indices where contents[slot]?.isContentDiscarded() == true {
            freed += nodes[slot].cost
            let value = remove(Int32(slot))
            if keepingValues { values.append(value) }
        }
        return (freed, values)
    }

    /// Removes entries not under access, largest cost first, until `target` cost is freed.
    /// A ``DiscardableContent`` value is asked to discard first and stays if it is in use.
    ///
    /// - Returns: the cost freed and, when `keepingValues`, the removed values.
    /// - Complexity: O(n) when everything goes and nothing is discardable; else O(n) to
    ///   build a heap plus O(log n) per entry examined.
    @inlinable
    mutating func release(target: Int, keepingValues: Bool) -> (freed: Int, values: [Value]) {
        guard target > 0 else { return (0, []) }
        if target >= totalCost {
            return releaseEverything(keepingValues: keepingValues)
        }
        var freed = 0
        var values: [Value] = []
        var largest = Heap<ReleaseCandidate>(nodes.indices.compactMap { slot in
            nodes[slot].key == nil ? nil : ReleaseCandidate(cost: nodes[slot].cost, slot: Int32(slot))
        })
        // Candidates are taken in batches whose values are prefetched first: the entries come
        // in cost order, scattered over the heap, and each free would otherwise wait for memory.
        let valueOffset = Self.prefetchableValueOffset
        var batch: [ReleaseCandidate] = []
        batch.reserveCapacity(Self.prefetchDistance)
        releasing: while freed < target {
            batch.removeAll(keepingCapacity: true)
            while batch.count < Self.prefetchDistance, let candidate = largest.popMax() {
                batch.append(candidate)
            }
            if let valueOffset {
                nodes.withUnsafeBufferPointer { nodes in
                    for candidate in batch { Self.prefetchValue(in: nodes, slot: Int(candidate.slot), valueOffset: valueOffset) }
                }
            }
            guard !batch.isEmpty else { break }
            for candidate in batch {
                guard freed < target else { break releasing }
                if !contents.isEmpty, let content = contents[Int(candidate.slot)], !content.discard() { continue }
                freed += candidate.cost
                let value = remove(candidate.slot)
                if keepingValues { values.append(value) }
            }
        }
        return (freed, values)
    }
}

extension CacheStorage {
    /// Removes every entry not under access: all of them at once when nothing is in use,
    /// which is the common case.
    ///
    /// With ``DiscardableContent`` stored, it is one pass over the slots in order, each value
    /// prefetched ``prefetchDistance`` slots ahead (the objects are scattered over the heap):
    /// content is asked to discard, and a value not in use is dropped (or taken, for the
    /// delegate) while its object is still in cache. When some content stays (in use), its
    /// entry is kept and the emptied ones are unlinked one by one.
    ///
    /// - Returns: the cost freed and, when `keepingValues`, the removed values.
    /// - Complexity: O(n).
    @inlinable
    mutating func releaseEverything(keepingValues: Bool) -> (freed: Int, values: [Value]) {
        guard discardableCount > 0 else {
            let freed = totalCost
            return (freed, removeAll(keepingValues: keepingValues))
        }
        var values: [Value] = []
        var inUse = 0
        let valueOffset = Self.prefetchableValueOffset
        var batch = DiscardBatch()
        nodes.withUnsafeMutableBufferPointer { nodes in
            contents.withUnsafeMutableBufferPointer { contents in
                for slot in nodes.indices {
                    if let valueOffset { Self.prefetchValue(in: UnsafeBufferPointer(nodes), slot: slot + Self.prefetchDistance, valueOffset: valueOffset) }
                    guard nodes[slot].key != nil else { continue }
                    if let content = contents[slot] {
                        // Batch-discardable content frees with its neighbours (PurgeableData:
                        // one atomic subtraction a page, not one a block).
                        guard content.discard(into: &batch) else {
                            inUse += 1
                            continue
                        }
                        contents[slot] = nil
                    }
                    let value = nodes[slot].value.take()
                    if keepingValues, let value { values.append(value) }
                }
            }
        }
        discardableCount = inUse  // the side array now holds exactly the content in use
        guard inUse > 0 else {
            let freed = totalCost
            reset()
            return (freed, values)
        }
        var freed = 0
        for slot in nodes.indices where nodes[slot].key != nil && nodes[slot].value == nil {
            freed += removeNode(Int32(slot)).cost
        }
        return (freed, values)
    }
}

/// An entry ordered by cost, for releasing the largest first.
@usableFromInline
struct ReleaseCandidate: Comparable {
    @usableFromInline var cost: Int
    @usableFromInline var slot: Int32

    @inlinable
    init(cost: Int, slot: Int32) {
        self.cost = cost
        self.slot = slot
    }

    @inlinable
    static func < (lhs: Self, rhs: Self) -> Bool { lhs.cost < rhs.cost || (lhs.cost == rhs.cost && lhs.slot < rhs.slot) }
}

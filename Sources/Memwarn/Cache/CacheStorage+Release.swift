public import HeapModule

extension CacheStorage {
    /// The cost of entries whose content was already discarded.
    ///
    /// - Complexity: O(n) when discardable content is stored, else O(1).
    @inlinable
    var discardedCost: Int {
        contents.reduce(0) { sum, entry in
            entry.value.isContentDiscarded() ? sum + nodes[Int(entry.key)].cost : sum
        }
    }

    /// Removes the entries whose content was discarded.
    ///
    /// - Returns: the cost freed and, when `keepingValues`, the removed values.
    @inlinable
    mutating func releaseDiscarded(keepingValues: Bool) -> (freed: Int, values: [Value]) {
        var freed = 0
        var values: [Value] = []
        for (slot, content) in contents where content.isContentDiscarded() {
            freed += nodes[Int(slot)].cost
            let value = remove(slot)
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
        if target >= totalCost && discardableCount == 0 {
            let freed = totalCost
            return (freed, removeAll(keepingValues: keepingValues))
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
                if let content = contents[candidate.slot] {
                    content.discardContentIfPossible()
                    guard content.isContentDiscarded() else { continue }
                }
                freed += candidate.cost
                let value = remove(candidate.slot)
                if keepingValues { values.append(value) }
            }
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

public import HeapModule

extension CacheStorage {
    /// The cost of entries whose content was already discarded.
    ///
    /// - Complexity: O(n) when discardable content is stored, else O(1).
    @inlinable
    var discardedCost: Int {
        guard discardableCount > 0 else { return 0 }
        return nodes.reduce(0) { sum, node in
            node.key != nil && node.content?.isContentDiscarded() == true ? sum + node.cost : sum
        }
    }

    /// Removes the entries whose content was discarded.
    ///
    /// - Returns: the cost freed and, when `keepingValues`, the removed values.
    @inlinable
    mutating func releaseDiscarded(keepingValues: Bool) -> (freed: Int, values: [Value]) {
        guard discardableCount > 0 else { return (0, []) }
        var freed = 0
        var values: [Value] = []
        for slot in nodes.indices where nodes[slot].key != nil && nodes[slot].content?.isContentDiscarded() == true {
            freed += nodes[slot].cost
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
            nodes[slot].key == nil ? nil : ReleaseCandidate(cost: nodes[slot].cost, slot: slot)
        })
        while freed < target, let candidate = largest.popMax() {
            if let content = nodes[candidate.slot].content {
                content.discardContentIfPossible()
                guard content.isContentDiscarded() else { continue }
            }
            freed += candidate.cost
            let value = remove(candidate.slot)
            if keepingValues { values.append(value) }
        }
        return (freed, values)
    }
}

/// An entry ordered by cost, for releasing the largest first.
@usableFromInline
struct ReleaseCandidate: Comparable {
    @usableFromInline var cost: Int
    @usableFromInline var slot: Int

    @inlinable
    init(cost: Int, slot: Int) {
        self.cost = cost
        self.slot = slot
    }

    @inlinable
    static func < (lhs: Self, rhs: Self) -> Bool { lhs.cost < rhs.cost || (lhs.cost == rhs.cost && lhs.slot < rhs.slot) }
}

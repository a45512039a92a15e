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
        var removed: [Value] = []
        guard discardableCount > 0 else { return (0, []) }
        for slot in contents.indices where contents[slot]?.isContentDiscarded() == true {
            freed += nodes[slot].cost
            let value = remove(Int32(slot))
            if keepingValues { removed.append(value) }
        }
        return (freed, removed)
    }

    /// Removes entries not under access, in ``releaseOrder``, until `target` cost is freed.
    /// A ``DiscardableContent`` value is asked to discard first and stays if it is in use.
    ///
    /// - Returns: the cost freed and, when `keepingValues`, the removed values.
    /// - Complexity: O(n) when everything goes and nothing is discardable; coldest first, O(1)
    ///   amortized per entry removed (O(n) when many are in use); balanced and largest first,
    ///   O(n) to order the entries and O(log n) per entry examined.
    @inlinable
    mutating func release(target: Int, keepingValues: Bool) -> (freed: Int, values: [Value]) {
        guard target > 0 else { return (0, []) }
        if target >= totalCost {
            return releaseEverything(keepingValues: keepingValues)
        }
        if releaseOrder.base == .coldestFirst {
            return releaseInEvictionOrder(target: target, keepingValues: keepingValues)
        }
        return releaseByPriority(target: target, keepingValues: keepingValues)
    }

    /// Removes entries by priority (``releaseCandidates()``) until `target` cost is freed,
    /// passing over content in use.
    @inlinable
    mutating func releaseByPriority(target: Int, keepingValues: Bool) -> (freed: Int, values: [Value]) {
        var candidates = releaseCandidates()
        var freed = 0
        var removed: [Value] = []
        // Candidates are taken in batches whose values are prefetched first: the entries come
        // scattered over the nodes, and each free would otherwise wait for memory.
        var batch: [Int32] = []
        batch.reserveCapacity(Self.prefetchDistance)
        releasing: while freed < target {
            batch.removeAll(keepingCapacity: true)
            while batch.count < Self.prefetchDistance, let slot = candidates.next() {
                batch.append(slot)
            }
            self.values.withUnsafeBufferPointer { values in
                for slot in batch { Self.prefetchValue(in: values, slot: Int(slot)) }
            }
            guard !batch.isEmpty else { break }
            for slot in batch {
                guard freed < target else { break releasing }
                if !contents.isEmpty, let content = contents[Int(slot)], !content.discard() { continue }
                freed += nodes[Int(slot)].cost
                let value = remove(slot)
                if keepingValues { removed.append(value) }
            }
        }
        return (freed, removed)
    }

    /// Removes entries as the eviction policy would under a cost limit `target` below what the
    /// cache holds (``DiscardableCacheReleaseOrder/coldestFirst``): the same walk, which moves
    /// entries read since they came to the main queue and takes one read from each main-queue
    /// entry it passes, so that repeated releases keep what a cache with that limit would keep.
    /// A ``DiscardableContent`` value in use stays, and counts as read.
    ///
    /// - Complexity: O(1) amortized per entry removed, as eviction.
    @inlinable
    mutating func releaseInEvictionOrder(target: Int, keepingValues: Bool) -> (freed: Int, values: [Value]) {
        let bound = max(1, totalCost - target)
        var freed = 0
        var removed: [Value] = []
        var refused = 0
        while freed < target {
            let victim = nextVictim(sparing: -1, costLimit: bound)
            guard victim >= 0 else { break }
            if !contents.isEmpty, let content = contents[Int(victim)], !content.discard() {
                // Marked read, the walk passes it by this time round. Many refusals mean the
                // walk is going round entries in use (the main queue can be all in use while
                // free entries wait in the small queue under its share): the rest comes by
                // priority over every entry, which passes over those in use.
                refused += 1
                frequencies[victim] = 1
                guard refused <= 4 * index.count else {
                    let rest = releaseByPriority(target: target - freed, keepingValues: keepingValues)
                    return (freed + rest.freed, removed + rest.values)
                }
                continue
            }
            freed += nodes[Int(victim)].cost
            let value = evict(victim, remembering: true)
            if keepingValues { removed.append(value) }
        }
        return (freed, removed)
    }

    /// The entries in the order a partial release by priority takes them: largest first, or
    /// balanced (cost over one more than the coldness). Coldest first walks the eviction policy
    /// instead (``releaseInEvictionOrder(target:keepingValues:)``).
    @inlinable
    func releaseCandidates() -> ReleaseCandidates {
        let byCostAlone = releaseOrder.base == .largestFirst
        return ReleaseCandidates(
            byPriority: Heap(
                nodes.indices.compactMap { slot in
                    guard nodes[slot].key != nil else { return nil }
                    let coldness = byCostAlone ? 0 : coldness(of: Int32(slot))
                    return ReleaseCandidate(priority: Double(nodes[slot].cost) / Double(coldness + 1), slot: Int32(slot))
                }))
    }

    /// How cold an entry is, 0 the coldest: never read in the small queue; not read since it
    /// was last looked at in the main queue; read in the small queue; then the main queue's by
    /// reads (1, 2, 3).
    @inlinable
    func coldness(of slot: Int32) -> Int {
        let reads = Int(frequencies[slot])
        if nodes[Int(slot)].queue == Self.smallQueue { return reads == 0 ? 0 : 2 }
        return reads == 0 ? 1 : 2 + reads
    }
}

/// The entries a partial release by priority takes, the highest priority first from a heap
/// (O(log n) each).
@usableFromInline
struct ReleaseCandidates {
    @usableFromInline var byPriority: Heap<ReleaseCandidate>

    @inlinable
    init(byPriority: Heap<ReleaseCandidate>) { self.byPriority = byPriority }

    @inlinable
    mutating func next() -> Int32? { byPriority.popMax()?.slot }
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
        var removed: [Value] = []
        var inUse = 0
        var batch = DiscardBatch()
        nodes.withUnsafeBufferPointer { nodes in
            self.values.withUnsafeMutableBufferPointer { values in
                contents.withUnsafeMutableBufferPointer { contents in
                    for slot in nodes.indices {
                        Self.prefetchValue(in: UnsafeBufferPointer(values), slot: slot + Self.prefetchDistance)
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
                        let value = values[slot].take()
                        if keepingValues, let value { removed.append(value) }
                    }
                }
            }
        }
        discardableCount = inUse  // the side array now holds exactly the content in use
        guard inUse > 0 else {
            let freed = totalCost
            reset()
            return (freed, removed)
        }
        var freed = 0
        for slot in nodes.indices where nodes[slot].key != nil && values[slot] == nil {
            freed += removeNode(Int32(slot)).cost
        }
        return (freed, removed)
    }
}

/// An entry and its priority for a release (its cost, or its cost for its coldness): the
/// highest goes first; among equals, the higher slot.
@usableFromInline
struct ReleaseCandidate: Comparable {
    @usableFromInline var priority: Double
    @usableFromInline var slot: Int32

    @inlinable
    init(priority: Double, slot: Int32) {
        self.priority = priority
        self.slot = slot
    }

    @inlinable
    static func < (lhs: Self, rhs: Self) -> Bool { lhs.priority < rhs.priority || (lhs.priority == rhs.priority && lhs.slot < rhs.slot) }
}

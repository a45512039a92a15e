/// The entries of a ``DiscardableCache``: a dictionary from key to slot, and the slots in a
/// doubly linked list from least to most recently used, kept in one array (freed slots are
/// reused). Not thread-safe: the cache holds its lock around every call.
///
/// Everything is `@inlinable` so a client's cache is specialized for its key and value
/// types; the state lives in one struct so an operation is one exclusive access, not one
/// per field.
@usableFromInline
struct CacheStorage<Key: Hashable, Value> {
    @usableFromInline
    struct Node {
        @usableFromInline var key: Key?
        @usableFromInline var value: Value?
        @usableFromInline var content: (any DiscardableContent)?
        @usableFromInline var cost: Int
        @usableFromInline var previous: Int
        @usableFromInline var next: Int

        @inlinable
        init(key: Key?, value: Value?, content: (any DiscardableContent)?, cost: Int, previous: Int, next: Int) {
            self.key = key
            self.value = value
            self.content = content
            self.cost = cost
            self.previous = previous
            self.next = next
        }

        @inlinable
        static var empty: Node { Node(key: nil, value: nil, content: nil, cost: 0, previous: -1, next: -1) }
    }

    /// What a lookup found.
    @usableFromInline
    enum Lookup {
        case hit(Value)
        case miss
        /// The value's content was discarded; the entry was removed.
        case evicted(Value)
    }

    @usableFromInline var index: [Key: Int] = [:]
    @usableFromInline var nodes: [Node] = []
    @usableFromInline var freeSlots: [Int] = []
    @usableFromInline var oldest = -1
    @usableFromInline var newest = -1
    @usableFromInline var totalCost = 0
    @usableFromInline var discardableCount = 0
    @usableFromInline var countLimit = 0
    @usableFromInline var totalCostLimit = 0
    @usableFromInline var evictsDiscarded = true

    @inlinable
    init() {}

    @inlinable
    var count: Int { index.count }

    /// The value for a key, made the most recently used.
    ///
    /// - Complexity: O(1).
    @inlinable
    mutating func lookup(_ key: Key) -> Lookup {
        guard let slot = index[key] else { return .miss }
        if evictsDiscarded, let content = nodes[slot].content, content.isContentDiscarded() {
            return .evicted(remove(slot))
        }
        moveToNewest(slot)
        return .hit(nodes[slot].value!)
    }

    /// Stores a value as the most recently used, then evicts the least recently used while
    /// a limit is exceeded.
    ///
    /// - Returns: the evicted values.
    /// - Complexity: O(1) amortized, plus O(1) per evicted entry.
    @inlinable
    mutating func insert(_ value: Value, content: (any DiscardableContent)?, forKey key: Key, cost: Int) -> [Value] {
        if let slot = index[key] {
            totalCost += cost - nodes[slot].cost
            if nodes[slot].content != nil { discardableCount -= 1 }
            nodes[slot].value = value
            nodes[slot].content = content
            nodes[slot].cost = cost
            moveToNewest(slot)
        } else {
            let node = Node(key: key, value: value, content: content, cost: cost, previous: newest, next: -1)
            let slot: Int
            if let free = freeSlots.popLast() {
                nodes[free] = node
                slot = free
            } else {
                slot = nodes.count
                nodes.append(node)
            }
            if newest >= 0 { nodes[newest].next = slot } else { oldest = slot }
            newest = slot
            index[key] = slot
            totalCost += cost
        }
        if content != nil { discardableCount += 1 }
        return evictOverLimits()
    }

    /// Removes the entry for a key.
    ///
    /// - Complexity: O(1).
    @inlinable
    mutating func removeValue(forKey key: Key) -> Value? {
        guard let slot = index[key] else { return nil }
        return remove(slot)
    }

    /// Removes every entry; returns the values when `keepingValues` (for the delegate).
    ///
    /// - Complexity: O(n).
    @inlinable
    mutating func removeAll(keepingValues: Bool) -> [Value] {
        let values = keepingValues ? nodes.compactMap { $0.key == nil ? nil : $0.value } : []
        index = [:]
        nodes = []
        freeSlots = []
        oldest = -1
        newest = -1
        totalCost = 0
        discardableCount = 0
        return values
    }

    /// Evicts the least recently used entries while a limit is exceeded.
    @inlinable
    mutating func evictOverLimits() -> [Value] {
        var evicted: [Value] = []
        while oldest >= 0, (countLimit > 0 && index.count > countLimit) || (totalCostLimit > 0 && totalCost > totalCostLimit) {
            evicted.append(remove(oldest))
        }
        return evicted
    }

    /// Removes the entry in a slot.
    ///
    /// - Complexity: O(1).
    @inlinable
    mutating func remove(_ slot: Int) -> Value {
        unlink(slot)
        let node = nodes[slot]
        nodes[slot] = .empty
        index[node.key!] = nil
        totalCost -= node.cost
        if node.content != nil { discardableCount -= 1 }
        freeSlots.append(slot)
        return node.value!
    }

    @inlinable
    mutating func unlink(_ slot: Int) {
        let previous = nodes[slot].previous
        let next = nodes[slot].next
        if previous >= 0 { nodes[previous].next = next } else { oldest = next }
        if next >= 0 { nodes[next].previous = previous } else { newest = previous }
    }

    @inlinable
    mutating func moveToNewest(_ slot: Int) {
        guard slot != newest else { return }
        unlink(slot)
        nodes[slot].previous = newest
        nodes[slot].next = -1
        if newest >= 0 { nodes[newest].next = slot } else { oldest = slot }
        newest = slot
    }
}

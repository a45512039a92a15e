/// The entries of a ``DiscardableCache``: a dictionary from key to slot, and the slots in a
/// doubly linked list from least to most recently used, kept in one array (freed slots are
/// reused). Not thread-safe: the cache holds its lock around every call.
///
/// Everything is `@inlinable` so a client's cache is specialized for its key and value
/// types; the state lives in one struct so an operation is one exclusive access, not one
/// per field. Nodes are kept small (links are 32-bit; ``DiscardableContent`` references live
/// in a side array, by slot, made only once a cache holds some) so the list costs few cache
/// misses.
@usableFromInline
struct CacheStorage<Key: Hashable, Value> {
    @usableFromInline
    struct Node {
        @usableFromInline var key: Key?
        @usableFromInline var value: Value?
        @usableFromInline var cost: Int
        @usableFromInline var previous: Int32
        @usableFromInline var next: Int32

        @inlinable
        init(key: Key?, value: Value?, cost: Int, previous: Int32, next: Int32) {
            self.key = key
            self.value = value
            self.cost = cost
            self.previous = previous
            self.next = next
        }

        @inlinable
        static var empty: Node { Node(key: nil, value: nil, cost: 0, previous: -1, next: -1) }
    }

    /// What a lookup found.
    @usableFromInline
    enum Lookup {
        case hit(Value)
        case miss
        /// The value's content was discarded; the entry was removed.
        case evicted(Value)
    }

    @usableFromInline var index: [Key: Int32] = [:]
    @usableFromInline var nodes: [Node] = []
    /// The ``DiscardableContent`` of each slot's value: empty while the cache has held none,
    /// then one element per node.
    @usableFromInline var contents: [ContentReference?] = []
    /// How many entries hold ``DiscardableContent``.
    @usableFromInline var discardableCount = 0
    @usableFromInline var freeSlots: [Int32] = []
    @usableFromInline var oldest: Int32 = -1
    @usableFromInline var newest: Int32 = -1
    @usableFromInline var totalCost = 0
    @usableFromInline var countLimit = 0
    @usableFromInline var totalCostLimit = 0
    @usableFromInline var evictsDiscarded = true
    /// The dynamic type of the last value stored, and whether it is ``DiscardableContent``:
    /// a cast per set would cost more than the rest of the set.
    @usableFromInline var lastValueType: ObjectIdentifier?
    @usableFromInline var lastValueTypeIsDiscardable = false

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
        if evictsDiscarded, discardableCount > 0, contents[Int(slot)]?.isContentDiscarded() == true {
            return .evicted(remove(slot))
        }
        moveToNewest(slot)
        return .hit(nodes[Int(slot)].value!)
    }

    /// Stores a value as the most recently used, then evicts the least recently used while
    /// a limit is exceeded.
    ///
    /// - Returns: the evicted values.
    /// - Complexity: O(1) amortized, plus O(1) per evicted entry.
    @inlinable
    mutating func insert(_ value: Value, content: (any DiscardableContent)?, forKey key: Key, cost: Int) -> [Value] {
        let slot: Int32
        if let existing = index[key] {
            slot = existing
            totalCost += cost - nodes[Int(slot)].cost
            nodes[Int(slot)].value = value
            nodes[Int(slot)].cost = cost
            moveToNewest(slot)
        } else {
            let node = Node(key: key, value: value, cost: cost, previous: newest, next: -1)
            if let free = freeSlots.popLast() {
                nodes[Int(free)] = node
                slot = free
            } else {
                precondition(nodes.count < Int(Int32.max), "a DiscardableCache holds at most 2^31 - 1 entries")
                slot = Int32(nodes.count)
                nodes.append(node)
            }
            if newest >= 0 { nodes[Int(newest)].next = slot } else { oldest = slot }
            newest = slot
            index[key] = slot
            totalCost += cost
        }
        setContent(content, at: slot)
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
        if !keepingValues { releaseValuesInSlotOrder() }
        reset()
        return values
    }

    /// Forgets every entry (values still in nodes are released with them).
    @inlinable
    mutating func reset() {
        index = [:]
        // Popped one by one, each node is destroyed by code specialized for the key and value
        // types: a check or two. Dropping the array with its elements (or `removeAll`) has
        // the runtime destroy each node through generic value witnesses, several calls a node:
        // about 10 ms for a million.
        while nodes.popLast() != nil {}
        nodes = []
        contents = []
        discardableCount = 0
        freeSlots = []
        oldest = -1
        newest = -1
        totalCost = 0
    }

    /// The value as ``DiscardableContent`` when it is one, with the answer for its dynamic
    /// type remembered. Only class instances are cast: with Foundation loaded, casting a value
    /// type such as `[UInt8]` to a class-bound protocol tries Objective-C bridging, which copies
    /// the whole array into an `NSArray` (measured: 0.5 s for a 1 MiB array).
    @inlinable
    mutating func discardableContent(of value: Value) -> (any DiscardableContent)? {
        let dynamicType = ObjectIdentifier(type(of: value))
        if dynamicType != lastValueType {
            lastValueType = dynamicType
            lastValueTypeIsDiscardable = type(of: value as Any) is any DiscardableContent.Type
        }
        return lastValueTypeIsDiscardable ? value as? any DiscardableContent : nil
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
    mutating func remove(_ slot: Int32) -> Value {
        removeNode(slot).value!
    }

    /// Unlinks the node in a slot, frees the slot and returns the node (its value may have
    /// been taken already).
    ///
    /// - Complexity: O(1).
    @inlinable
    mutating func removeNode(_ slot: Int32) -> Node {
        unlink(slot)
        var node = Node.empty
        swap(&node, &nodes[Int(slot)])  // a move: no retain and release of the value
        index[node.key!] = nil
        totalCost -= node.cost
        setContent(nil, at: slot)
        freeSlots.append(slot)
        return node
    }

    /// Records the ``DiscardableContent`` of the value in a slot (`nil`: it is none). The side
    /// array is made on the first content, and grows with the nodes.
    @inlinable
    mutating func setContent(_ content: (any DiscardableContent)?, at slot: Int32) {
        if contents.isEmpty {
            guard content != nil else { return }
            contents = Array(repeating: nil, count: nodes.count)
        }
        if contents.count < nodes.count {
            contents.append(contentsOf: repeatElement(nil, count: nodes.count - contents.count))
        }
        if contents[Int(slot)] != nil { discardableCount -= 1 }
        contents[Int(slot)] = content.map(ContentReference.init)
        if content != nil { discardableCount += 1 }
    }

    @inlinable
    mutating func unlink(_ slot: Int32) {
        let previous = nodes[Int(slot)].previous
        let next = nodes[Int(slot)].next
        if previous >= 0 { nodes[Int(previous)].next = next } else { oldest = next }
        if next >= 0 { nodes[Int(next)].previous = previous } else { newest = previous }
    }

    @inlinable
    mutating func moveToNewest(_ slot: Int32) {
        guard slot != newest else { return }
        unlink(slot)
        nodes[Int(slot)].previous = newest
        nodes[Int(slot)].next = -1
        if newest >= 0 { nodes[Int(newest)].next = slot } else { oldest = slot }
        newest = slot
    }
}


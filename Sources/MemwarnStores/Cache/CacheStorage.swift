/// The entries of a ``DiscardableCache`` and its eviction policy, S3-FIFO (Yang et al., SOSP
/// '23): a dictionary from key to slot, each slot's value in an array, and the slots' nodes in
/// two FIFO queues kept in one array — a small queue (5 % of the limits) that new entries
/// enter, and a main queue — with a count of reads (0 to 3) per slot.
///
/// - A hit only counts the read (``FrequencyTable``): no queue changes, so it runs under the
///   cache's shared lock.
/// - A new entry enters the small queue, or the main queue when its key was evicted from the
///   small queue recently (``GhostKeys``).
/// - Eviction takes from the small queue while it is over its share: an entry read since it came
///   moves to the main queue, one never read is evicted (and remembered by the ghost); else from
///   the main queue as CLOCK does: an entry read since it was last looked at goes round again
///   with one read less, one not read is evicted. One-time reads (a scan) never reach the main
///   queue, and a key set in a loop slightly larger than the cache keeps part of the loop.
/// - The entry being set is never evicted to make room for itself, unless its own cost exceeds
///   the limit.
///
/// Not thread-safe on its own: the cache holds its lock around every call (shared for
/// ``peek(_:)``, alone for the rest). Everything is `@inlinable` so a client's cache is
/// specialized for its key and value types. ``DiscardableContent`` references live in a side
/// array, by slot, made only once a cache holds some.
@usableFromInline
struct CacheStorage<Key: Hashable, Value>: ~Copyable {
    @usableFromInline
    struct Node {
        // In this order, `queue` fills the padding after an optional `Int` key: 32 bytes a
        // node for `Int` keys, not 40.
        @usableFromInline var key: Key?
        /// ``CacheStorage/smallQueue`` or ``CacheStorage/mainQueue``; 0 for a free slot.
        @usableFromInline var queue: UInt8
        @usableFromInline var cost: Int
        @usableFromInline var previous: Int32
        @usableFromInline var next: Int32

        @inlinable
        init(key: Key?, cost: Int, previous: Int32, next: Int32, queue: UInt8) {
            self.key = key
            self.cost = cost
            self.previous = previous
            self.next = next
            self.queue = queue
        }

        @inlinable
        static var empty: Node { Node(key: nil, cost: 0, previous: -1, next: -1, queue: 0) }
    }

    /// One FIFO queue: entries go in at `newest`, the eviction looks at `oldest`.
    @usableFromInline
    struct Queue {
        @usableFromInline var newest: Int32 = -1
        @usableFromInline var oldest: Int32 = -1
        @usableFromInline var count = 0
        @usableFromInline var cost = 0

        @inlinable
        init() {}

        /// Counts in a node already linked after the newest: it becomes the newest.
        @inlinable
        mutating func appendLinked(_ slot: Int32, cost: Int) {
            if newest < 0 { oldest = slot }
            newest = slot
            count += 1
            self.cost += cost
        }
    }

    /// What a lookup found.
    @usableFromInline
    enum Lookup {
        case hit(Value)
        case miss
        /// The value's content was discarded: the entry is to be evicted (under the lock held alone).
        case discarded
    }

    @usableFromInline static var smallQueue: UInt8 { 1 }
    @usableFromInline static var mainQueue: UInt8 { 2 }

    @usableFromInline var index: [Key: Int32] = [:]
    @usableFromInline var nodes = SlotBuffer<Node>()
    /// Each slot's value, beside its node: a hit reads the index and this dense array, never the
    /// (four times larger) node. Not in the index: a release frees the values in slot order,
    /// about the order they were allocated, which malloc frees several times faster than in the
    /// index's hash order (measured: 1 GiB in 1,000,000 `[UInt8]`s, ~130 against ~400 ms).
    @usableFromInline var values = SlotBuffer<Value?>()
    @usableFromInline let frequencies = FrequencyTable()
    @usableFromInline var small = Queue()
    @usableFromInline var main = Queue()
    @usableFromInline var ghost = GhostKeys()
    /// The ``DiscardableContent`` of each slot's value: empty while the cache has held none,
    /// then one element per node.
    @usableFromInline var contents: [ContentReference?] = []
    /// How many entries hold ``DiscardableContent``.
    @usableFromInline var discardableCount = 0
    @usableFromInline var freeSlots: [Int32] = []
    /// The cost of every entry: the two queues' costs, which every link and unlink keeps.
    @inlinable var totalCost: Int { small.cost + main.cost }
    @usableFromInline var countLimit = 0
    /// The cost limit the eviction keeps to: the smaller of ``ownCostLimit`` and
    /// ``trimCostLimit`` that is set (0: neither). Kept in one field so a set reads one limit.
    @usableFromInline var totalCostLimit = 0
    /// The cache's own `totalCostLimit`, as its user set it (0: none).
    @usableFromInline var ownCostLimit = 0
    /// The proactive trim's ceiling (0: none).
    @usableFromInline var trimCostLimit = 0
    /// How many sets stored a key the cache did not hold: its refills, which the trim watches.
    @usableFromInline var refills = 0
    @usableFromInline var evictsDiscarded = true
    @usableFromInline var releaseOrder = DiscardableCacheReleaseOrder.coldestFirst
    /// The dynamic type of the last value stored, and whether it is ``DiscardableContent``:
    /// a cast per set would cost more than the rest of the set.
    @usableFromInline var lastValueType: ObjectIdentifier?
    @usableFromInline var lastValueTypeIsDiscardable = false

    @inlinable
    init() {}

    @inlinable
    var count: Int { index.count }

    /// Sets the cache's own cost limit and the trim's ceiling (0: none) and the limit the
    /// eviction keeps to, the smaller of the two that are set.
    @inlinable
    mutating func setCostLimits(own: Int, trim: Int) {
        ownCostLimit = own
        trimCostLimit = trim
        totalCostLimit = own == 0 ? trim : (trim == 0 ? own : min(own, trim))
    }

    // MARK: Reads (shared lock)

    /// The value for a key, its read counted. Writes nothing but the read count (an atomic):
    /// safe under the shared lock, on several threads at once.
    ///
    /// Borrowing: a `mutating` method would be a modifying access, which two readers may not
    /// make at once (the thread sanitizer reports it), and were the storage copyable, a
    /// non-`mutating` call through the cache's pointer would copy it first — a retain and a
    /// release of each of its buffers on every hit, and from two threads the same reference
    /// counts (measured: gets 3× slower, two threads at half the throughput of one). The
    /// storage is noncopyable, so a read borrows it in place.
    ///
    /// - Complexity: O(1).
    @inlinable @inline(__always)
    func peek(_ key: Key) -> Lookup {
        guard let slot = index[key] else { return .miss }
        if evictsDiscarded, discardableCount > 0, contents[Int(slot)]?.isContentDiscarded() == true { return .discarded }
        // The read is counted before the value is copied: the count and the value are loaded
        // side by side, where the value's retain (a locked instruction, which waits for every
        // load before it) would otherwise make the count's cache miss wait for the object's.
        frequencies.recordRead(slot)
        return .hit(values[Int(slot)]!)
    }

    /// Removes the entry for `key` if its content is (still) discarded.
    ///
    /// - Returns: the removed value.
    @inlinable
    mutating func removeIfDiscarded(_ key: Key) -> Value? {
        guard evictsDiscarded, discardableCount > 0, let slot = index[key], contents[Int(slot)]?.isContentDiscarded() == true else { return nil }
        return remove(slot)
    }

    // MARK: Writes (lock held alone)

    /// Stores a value, then evicts while a limit is exceeded (never the entry just set, unless
    /// its own cost exceeds the cost limit).
    ///
    /// - Returns: the evicted values.
    /// - Complexity: O(1) amortized, plus O(1) amortized per evicted entry.
    @inlinable
    mutating func insert(_ value: Value, content: (any DiscardableContent)?, forKey key: Key, cost: Int) -> [Value] {
        // One probe of the index: its `default:` subscript gives the slot held, or takes the
        // slot about to be filled.
        let vacant = freeSlots.last ?? Int32(clamping: nodes.count)
        var held: Int32 = -1
        Self.claim(&index[key, default: -1], vacant: vacant, held: &held)
        let slot: Int32
        if held >= 0 {
            slot = held
            let change = cost - nodes[Int(slot)].cost
            if nodes[Int(slot)].queue == Self.smallQueue { small.cost += change } else { main.cost += change }
            values[Int(slot)] = value
            nodes[Int(slot)].cost = cost
            frequencies.recordRead(slot)  // a set of a key held is a use of it
        } else {
            slot = vacant
            refills &+= 1
            let queue = !ghost.isEmpty && ghost.remove(key.hashValue) ? Self.mainQueue : Self.smallQueue
            // Made already linked to its queue's newest entry: one write of the node, where
            // `push` rewrites its links (measured: 3-5 ns a set at 20,000 entries).
            let previous = queue == Self.smallQueue ? small.newest : main.newest
            let node = Node(key: key, cost: cost, previous: previous, next: -1, queue: queue)
            if !freeSlots.isEmpty {
                freeSlots.removeLast()
                nodes[Int(slot)] = node
                values[Int(slot)] = value
            } else {
                precondition(nodes.count < Int(Int32.max), "a DiscardableCache holds at most 2^31 - 1 entries")
                nodes.append(node)
                values.append(value)
                frequencies.reserve(nodes.count)
            }
            frequencies[slot] = 0
            if previous >= 0 { nodes[Int(previous)].next = slot }
            if queue == Self.smallQueue { small.appendLinked(slot, cost: cost) } else { main.appendLinked(slot, cost: cost) }
        }
        if content != nil || !contents.isEmpty { setContent(content, at: slot) }
        return isOverLimits ? evictOverLimits(protecting: slot) : []
    }

    /// Reads the slot an index entry holds into `held` (-1: none), and sets it to `vacant` when it
    /// held none.
    @inlinable
    static func claim(_ entry: inout Int32, vacant: Int32, held: inout Int32) {
        held = entry
        if entry < 0 { entry = vacant }
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
        let kept = keepingValues ? values.withUnsafeBufferPointer { $0.compactMap { $0 } } : []
        if !keepingValues { releaseValuesInSlotOrder() }
        reset()
        return kept
    }

    /// Forgets every entry (values still in nodes are released with them).
    @inlinable
    mutating func reset() {
        index = [:]
        // Each node and value destroyed one by one, in code specialized for the key and value
        // types (see ``SlotBuffer/removeAll()``).
        nodes.removeAll()
        values.removeAll()
        contents = []
        discardableCount = 0
        freeSlots = []
        small = Queue()
        main = Queue()
        ghost = GhostKeys()
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

    /// Removes the entry in a slot.
    ///
    /// - Complexity: O(1).
    @inlinable
    mutating func remove(_ slot: Int32) -> Value {
        let value = values[Int(slot)].take()!
        removeNode(slot)
        return value
    }

    /// Unlinks the node in a slot, frees the slot and returns the node. Its value must have been
    /// taken already (``remove(_:)``, or a release that dropped it).
    ///
    /// - Complexity: O(1).
    @inlinable @discardableResult
    mutating func removeNode(_ slot: Int32) -> Node {
        unlink(slot)
        var node = Node.empty
        swap(&node, &nodes[Int(slot)])  // a move: no retain and release of the key
        index[node.key!] = nil
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
}

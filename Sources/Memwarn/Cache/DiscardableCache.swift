import HeapModule

/// Told when a ``DiscardableCache`` evicts or removes a value: `NSCacheDelegate`, for Linux.
public protocol DiscardableCacheDelegate: AnyObject {
    /// Called once a value has left the cache (limit eviction, memory release, discarded
    /// content, `removeObject`, `removeAllObjects`). It runs outside the cache's lock, so it
    /// may call back into the cache.
    func cache(_ cache: AnyObject, willEvictObject object: Any)
}

/// A thread-safe cache with the API of Apple's `NSCache` that gives memory back when memory
/// is tight — on Linux, where Foundation's `NSCache` never does.
///
/// Code ports by renaming the type. Differences from Foundation on Linux, all deliberate:
/// limit eviction removes the *least recently used* entry (Foundation removes the cheapest),
/// get and set are O(1) at any size (Foundation's set is O(n)), the delegate is called
/// outside the lock, and keys are any `Hashable` type.
///
/// On a memory warning (through ``ReleaseCoordinator``, which the cache joins at init) it
/// releases entries not under access, largest cost first, until the coordinator's target is
/// met, and drops values whose ``DiscardableContent`` was discarded. For that accounting,
/// **cost is bytes**: give each entry its size as its cost.
///
/// Values are handed out as `NSCache` hands them out: sharing them across threads is the
/// caller's business.
public final class DiscardableCache<Key: Hashable & Sendable, Value>: MemoryConsumer, @unchecked Sendable {
    // @unchecked: every stored property below `lock` is read and written only while `lock`
    // is held; `tier` and `coordinator` are immutable.

    struct Node {
        var key: Key?
        var value: Value?
        var content: (any DiscardableContent)?
        var cost: Int
        var previous: Int
        var next: Int
    }

    private let lock = Lock()
    private var index: [Key: Int] = [:]
    private var nodes: [Node] = []
    private var freeSlots: [Int] = []
    private var oldest = -1
    private var newest = -1
    private var storedCost = 0
    private var discardableCount = 0
    private var storedName = ""
    private var storedCountLimit = 0
    private var storedTotalCostLimit = 0
    private var storedEvictsDiscarded = true
    private weak var storedDelegate: (any DiscardableCacheDelegate)?

    /// The release tier: ``ReleaseTier/caches``.
    public let tier = ReleaseTier.caches

    /// Creates an empty cache and registers it with `coordinator` (weakly: a deallocated
    /// cache leaves by itself).
    public init(coordinator: ReleaseCoordinator? = .shared) {
        coordinator?.register(self)
    }

    /// The cache's name, for reports (empty by default, as in `NSCache`).
    public var name: String {
        get { lock.withLock { storedName } }
        set { lock.withLock { storedName = newValue } }
    }

    /// The most entries the cache keeps; 0 means no limit.
    public var countLimit: Int {
        get { lock.withLock { storedCountLimit } }
        set { evictingAfter { storedCountLimit = max(0, newValue) } }
    }

    /// The most total cost the cache keeps; 0 means no limit.
    public var totalCostLimit: Int {
        get { lock.withLock { storedTotalCostLimit } }
        set { evictingAfter { storedTotalCostLimit = max(0, newValue) } }
    }

    /// Whether values whose ``DiscardableContent`` was discarded are evicted (default `true`).
    public var evictsObjectsWithDiscardedContent: Bool {
        get { lock.withLock { storedEvictsDiscarded } }
        set { lock.withLock { storedEvictsDiscarded = newValue } }
    }

    /// Told of every eviction and removal. Held weakly, as in `NSCache`.
    public var delegate: (any DiscardableCacheDelegate)? {
        get { lock.withLock { storedDelegate } }
        set { lock.withLock { storedDelegate = newValue } }
    }

    /// The number of entries.
    public var count: Int { lock.withLock { index.count } }

    /// The sum of the entries' costs.
    public var totalCost: Int { lock.withLock { storedCost } }

    /// The value for a key, which becomes the most recently used; `nil` when absent, or
    /// when its content was discarded and ``evictsObjectsWithDiscardedContent`` is set (the
    /// entry is then evicted).
    ///
    /// - Complexity: O(1).
    public func object(forKey key: Key) -> Value? {
        lock.lock()
        guard let slot = index[key] else {
            lock.unlock()
            return nil
        }
        if storedEvictsDiscarded, let content = nodes[slot].content, content.isContentDiscarded() {
            let value = remove(slot)
            let delegate = storedDelegate
            lock.unlock()
            delegate?.cache(self, willEvictObject: value as Any)
            return nil
        }
        moveToNewest(slot)
        let value = nodes[slot].value
        lock.unlock()
        return value
    }

    /// Stores a value with cost 0.
    ///
    /// - Complexity: O(1) amortized.
    public func setObject(_ object: Value, forKey key: Key) {
        setObject(object, forKey: key, cost: 0)
    }

    /// Stores a value with a cost (its size in bytes, for memory accounting), then evicts
    /// the least recently used entries while a limit is exceeded.
    ///
    /// - Complexity: O(1) amortized, plus O(1) per evicted entry.
    public func setObject(_ object: Value, forKey key: Key, cost: Int) {
        let cost = max(0, cost)
        let content = Self.discardableContent(of: object)
        lock.lock()
        if let slot = index[key] {
            storedCost += cost - nodes[slot].cost
            if nodes[slot].content != nil { discardableCount -= 1 }
            nodes[slot].value = object
            nodes[slot].content = content
            nodes[slot].cost = cost
            moveToNewest(slot)
        } else {
            let node = Node(key: key, value: object, content: content, cost: cost, previous: newest, next: -1)
            let slot: Int
            if let free = freeSlots.popLast() {
                nodes[free] = node
                slot = free
            } else {
                nodes.append(node)
                slot = nodes.count - 1
            }
            if newest >= 0 { nodes[newest].next = slot } else { oldest = slot }
            newest = slot
            index[key] = slot
            storedCost += cost
        }
        if content != nil { discardableCount += 1 }
        let evicted = evictOverLimits()
        let delegate = storedDelegate
        lock.unlock()
        notify(delegate, evicted)
    }

    /// Removes the value for a key (the delegate is told).
    ///
    /// - Complexity: O(1).
    public func removeObject(forKey key: Key) {
        lock.lock()
        guard let slot = index[key] else {
            lock.unlock()
            return
        }
        let value = remove(slot)
        let delegate = storedDelegate
        lock.unlock()
        delegate?.cache(self, willEvictObject: value as Any)
    }

    /// Removes every value (the delegate is told of each).
    ///
    /// - Complexity: O(n).
    public func removeAllObjects() {
        lock.lock()
        let delegate = storedDelegate
        let values = delegate == nil ? [] : nodes.compactMap { $0.key == nil ? nil : $0.value }
        clear()
        lock.unlock()
        notify(delegate, values)
    }

    // MARK: MemoryConsumer

    /// The sum of the entries' costs (cost is bytes).
    public var footprintBytes: Int { totalCost }

    /// The cost of entries whose content was already discarded.
    ///
    /// - Complexity: O(n) when the cache holds discardable content, else O(1).
    public var discardedBytes: Int {
        lock.withLock {
            guard discardableCount > 0 else { return 0 }
            return nodes.reduce(0) { sum, node in
                node.key != nil && node.content?.isContentDiscarded() == true ? sum + node.cost : sum
            }
        }
    }

    /// Releases memory: in tier ``ReleaseTier/discarded`` the entries whose content is gone;
    /// in ``ReleaseTier/caches`` entries not under access, largest cost first, until
    /// `targetBytes` are freed (discardable values are asked to discard first, and stay if
    /// they are in use).
    ///
    /// - Complexity: O(n) to choose, plus O(k log n) for k entries released when the target
    ///   is smaller than the cache; O(n) when it takes everything.
    public func release(_ request: ReleaseRequest) -> Int {
        lock.lock()
        var freed = 0
        var released: [Value] = []
        let keepValues = storedDelegate != nil
        func take(_ slot: Int) {
            freed += nodes[slot].cost
            let value = remove(slot)
            if keepValues { released.append(value) }
        }
        func releasable(_ slot: Int) -> Bool {
            guard let content = nodes[slot].content else { return true }
            content.discardContentIfPossible()
            return content.isContentDiscarded()
        }
        if request.tier == .discarded {
            if discardableCount > 0 {
                for slot in nodes.indices where nodes[slot].key != nil && nodes[slot].content?.isContentDiscarded() == true {
                    take(slot)
                }
            }
        } else if request.targetBytes <= 0 {
            // Nothing is wanted.
        } else if request.targetBytes >= storedCost && discardableCount == 0 {
            freed = storedCost
            if keepValues { released = nodes.compactMap { $0.key == nil ? nil : $0.value } }
            clear()
        } else {
            var largest = Heap<ReleaseCandidate>(nodes.indices.compactMap { slot in
                nodes[slot].key == nil ? nil : ReleaseCandidate(cost: nodes[slot].cost, slot: slot)
            })
            while freed < request.targetBytes, let candidate = largest.popMax() {
                if releasable(candidate.slot) { take(candidate.slot) }
            }
        }
        let delegate = storedDelegate
        lock.unlock()
        notify(delegate, released)
        return freed
    }

    /// The value as ``DiscardableContent`` when it is one. Only class instances are cast:
    /// with Foundation loaded, casting a value type such as `[UInt8]` to a class-bound
    /// protocol tries Objective-C bridging, which copies the whole array into an `NSArray`
    /// (measured: 0.5 s for a 1 MiB array).
    @inline(__always)
    static func discardableContent(of object: Value) -> (any DiscardableContent)? {
        guard type(of: object as Any) is AnyObject.Type else { return nil }
        return object as? any DiscardableContent
    }

    // MARK: Storage (lock held)

    private func evictingAfter(_ change: () -> Void) {
        lock.lock()
        change()
        let evicted = evictOverLimits()
        let delegate = storedDelegate
        lock.unlock()
        notify(delegate, evicted)
    }

    private func evictOverLimits() -> [Value] {
        var evicted: [Value] = []
        while oldest >= 0,
              (storedCountLimit > 0 && index.count > storedCountLimit) || (storedTotalCostLimit > 0 && storedCost > storedTotalCostLimit) {
            evicted.append(remove(oldest))
        }
        return evicted
    }

    private func notify(_ delegate: (any DiscardableCacheDelegate)?, _ values: [Value]) {
        guard let delegate else { return }
        for value in values { delegate.cache(self, willEvictObject: value as Any) }
    }

    private func unlink(_ slot: Int) {
        let previous = nodes[slot].previous
        let next = nodes[slot].next
        if previous >= 0 { nodes[previous].next = next } else { oldest = next }
        if next >= 0 { nodes[next].previous = previous } else { newest = previous }
    }

    private func moveToNewest(_ slot: Int) {
        guard slot != newest else { return }
        unlink(slot)
        nodes[slot].previous = newest
        nodes[slot].next = -1
        if newest >= 0 { nodes[newest].next = slot } else { oldest = slot }
        newest = slot
    }

    private func remove(_ slot: Int) -> Value {
        unlink(slot)
        let node = nodes[slot]
        index[node.key!] = nil
        storedCost -= node.cost
        if node.content != nil { discardableCount -= 1 }
        nodes[slot] = Node(key: nil, value: nil, content: nil, cost: 0, previous: -1, next: -1)
        freeSlots.append(slot)
        return node.value!
    }

    private func clear() {
        index = [:]
        nodes = []
        freeSlots = []
        oldest = -1
        newest = -1
        storedCost = 0
        discardableCount = 0
    }
}

/// An entry ordered by cost, for releasing the largest first.
struct ReleaseCandidate: Comparable {
    var cost: Int
    var slot: Int
    static func < (lhs: Self, rhs: Self) -> Bool { lhs.cost < rhs.cost || (lhs.cost == rhs.cost && lhs.slot < rhs.slot) }
}

public import MemwarnRelease

/// Told when a ``DiscardableCache`` evicts or removes a value: `NSCacheDelegate`, for Linux.
public protocol DiscardableCacheDelegate: AnyObject, Sendable {
    /// Called once a value has left the cache (limit eviction, memory release, discarded
    /// content, `removeObject`, `removeAllObjects`), on the thread that removed it — for a
    /// memory release, the releasing thread. It runs outside the cache's lock, so it may call
    /// back into the cache.
    ///
    /// - Parameters:
    ///   - cache: the ``DiscardableCache`` the value left.
    ///   - object: the value.
    func cache(_ cache: AnyObject, willEvictObject object: Any)
}

/// A thread-safe cache with the API of Apple's `NSCache` that gives memory back when memory
/// is tight — on Linux, where Foundation's `NSCache` never does.
///
/// Code ports by renaming the type. Differences from Foundation on Linux, all deliberate:
/// limit eviction follows S3-FIFO (below; Foundation removes the cheapest), get and set are
/// O(1) at any size (Foundation's set is O(n)), reads run in parallel, the delegate is called
/// outside the lock, and keys are any `Hashable` type.
///
/// ## Eviction
///
/// `NSCache` documents no eviction order; this one evicts as S3-FIFO does (Yang et al., SOSP
/// '23): a new entry waits in a small queue, 5 % of the limits, and moves on to the main
/// queue only if it is read again before it reaches the small queue's end (a key set again soon
/// after it left unread goes straight to the main queue); entries in the main queue go round
/// again while they are read. On Zipf traces it has 1.01–6.2 times LRU's hit
/// ratio (1.76× and 1.35× on Zipf 0.9 with a cache of 0.1 % and 1 % of the keys), a one-time
/// scan does not flush it, and a loop slightly larger than the cache keeps about 80 % of its
/// hits where LRU keeps none (`Benchmarks/run hits`). Its promises are
/// `NSCache`'s: an object just set can be read back at once unless its own cost exceeds the cost
/// limit; the limits hold after every set; the delegate hears of every value that leaves;
/// content under access is never discarded.
///
/// ## Memory warnings
///
/// On a memory warning (through ``/MemwarnRelease/ReleaseCoordinator``, which the cache joins at init) it
/// releases entries not under access until the coordinator's target is met — all of them when
/// the target is everything, else in ``releaseOrder`` (by default as the cache's own eviction would take them) — and drops
/// values whose ``DiscardableContent`` was discarded. For that accounting, **cost is bytes**:
/// give each entry its size as its cost.
///
/// With the monitor's proactive trim on (`trim_interval` in the policy), the cache also keeps to
/// a ceiling the trim lowers while memory is calm and raises when the cache's refills rise
/// (``trimCeilingBytes``, ``refillCount``).
///
/// ## Threads
///
/// Every method is thread-safe. A read (``object(forKey:)``) takes the cache's lock shared and
/// changes nothing but the entry's read count (an atomic byte, written only while it is below
/// three): reads on several threads run at once, and each announces itself on a cache line of its
/// CPU's. A set, a removal, a limit change or a release takes the lock alone: it waits for the
/// reads under way and holds new ones off until it is done. Two threads reading get more done
/// together than one (1.8–2× with `Int` values, in `Benchmarks/run cache`; with class values
/// each read also retains the object, and two threads reading the same objects contend on
/// their reference counts); a thread setting meanwhile slows them both. A set and a get cost
/// 1.3–1.6× a `Mutex`-locked `Dictionary`'s in `Benchmarks/run cache` on 2-CPU machines (more
/// on a busy host; the Benchmarks README has the figures). A set also visits one reader counter
/// per CPU, so it costs more with more CPUs. The read-only properties (``count``, ``totalCost``, the limits) take the lock shared.
///
/// The cache is `Sendable` when its values are: a cache of non-`Sendable` values stays on the
/// thread or task that owns it, as the compiler checks, and memwarn's releases still reach it
/// (see ``init(coordinator:)``).
public final class DiscardableCache<Key: Hashable & Sendable, Value> {

    @usableFromInline let lock = ReadMostlyLock()
    /// The entries, in memory of their own, reached through ``storage``'s addressors: every
    /// access is under `lock` (reads shared, writes alone). A stored property would make each
    /// access a formal one (a runtime check; and a read through a `mutating` call is a
    /// modification, which readers on two threads may not make at once), and a non-`mutating`
    /// call on a stored struct copies it (a retain and a release of each of its buffers).
    @usableFromInline let storageAddress: UnsafeMutablePointer<CacheStorage<Key, Value>>

    /// The entries, borrowed or changed in place.
    @inlinable
    var storage: CacheStorage<Key, Value> {
        unsafeAddress { UnsafePointer(storageAddress) }
        unsafeMutableAddress { storageAddress }
    }
    @usableFromInline var storedName = ""
    @usableFromInline weak var storedDelegate: (any DiscardableCacheDelegate)?

    /// The release work, made in ``init(coordinator:)``: there it is compiled for the client's
    /// concrete `Key` and `Value`, while ``release(_:)`` is reached through the
    /// ``/MemwarnRelease/MemoryConsumer`` protocol, where the code would otherwise run generic (measured: a
    /// metadata lookup per entry, over half the time of a full release).
    @usableFromInline let releaseEntries: ReleaseEntries

    @usableFromInline
    typealias ReleaseEntries = (inout CacheStorage<Key, Value>, ReleaseRequest, _ keepingValues: Bool) -> (freed: Int, values: [Value])

    /// Registered with the coordinator in the cache's place (see ``init(coordinator:)``); set
    /// in init, never changed.
    @usableFromInline var consumer: CacheConsumer<Key, Value>?

    /// The consumer that stands for the cache in a coordinator's registry: what the cache
    /// registers with its coordinator, and what to register with another one. It holds the
    /// cache weakly (the cache holds it): keep the cache, not only this.
    public var memoryConsumer: any MemoryConsumer { consumer! }

    /// Creates an empty cache and registers it with `coordinator` (weakly: a deallocated
    /// cache leaves by itself).
    ///
    /// The coordinator releases from its own thread (the monitor's release thread). What it
    /// registers is a small consumer of the cache's that reaches the entries only under the
    /// cache's lock, drops the values it releases, asks their ``DiscardableContent`` (which is
    /// `Sendable`) to discard, and hands removed values to the delegate (also `Sendable`) on
    /// that thread: no value is handed out to another thread's code. That is why a cache of
    /// non-`Sendable` values can join too.
    ///
    /// - Parameter coordinator: the coordinator whose releases the cache answers; `nil` for
    ///   none (then only its limits evict).
    @inlinable
    public init(coordinator: ReleaseCoordinator? = .shared) {
        storageAddress = .allocate(capacity: 1)
        storageAddress.initialize(to: CacheStorage())
        releaseEntries = { storage, request, keepingValues in
            request.tier == .discarded
                ? storage.releaseDiscarded(keepingValues: keepingValues)
                : storage.release(target: request.targetBytes, keepingValues: keepingValues)
        }
        let consumer = CacheConsumer(self)
        self.consumer = consumer
        coordinator?.register(consumer)
    }

    deinit {
        storageAddress.deinitialize(count: 1)
        storageAddress.deallocate()
    }

    /// The cache's name, for reports (empty by default, as in `NSCache`).
    public var name: String {
        get { lock.withSharedLock { storedName } }
        set { lock.withLock { storedName = newValue } }
    }

    /// The most entries the cache keeps; 0 means no limit.
    public var countLimit: Int {
        get { lock.withSharedLock { storage.countLimit } }
        set { changeLimits { $0.countLimit = max(0, newValue) } }
    }

    /// The most total cost the cache keeps; 0 means no limit.
    public var totalCostLimit: Int {
        get { lock.withSharedLock { storage.ownCostLimit } }
        set { changeLimits { $0.setCostLimits(own: max(0, newValue), trim: $0.trimCostLimit) } }
    }

    /// Whether values whose ``DiscardableContent`` was discarded are evicted (default `true`).
    public var evictsObjectsWithDiscardedContent: Bool {
        get { lock.withSharedLock { storage.evictsDiscarded } }
        set { lock.withLock { storage.evictsDiscarded = newValue } }
    }

    /// Told of every eviction and removal. Held weakly, as in `NSCache`.
    public var delegate: (any DiscardableCacheDelegate)? {
        get { lock.withSharedLock { storedDelegate } }
        set { lock.withLock { storedDelegate = newValue } }
    }

    /// Which entries a memory release takes first when it asks for part of the cache's bytes
    /// (default ``DiscardableCacheReleaseOrder/coldestFirst``: as the cache's own eviction would).
    public var releaseOrder: DiscardableCacheReleaseOrder {
        get { lock.withSharedLock { storage.releaseOrder } }
        set { lock.withLock { storage.releaseOrder = newValue } }
    }

    /// The number of entries.
    public var count: Int { lock.withSharedLock { storage.count } }

    /// The sum of the entries' costs.
    public var totalCost: Int { lock.withSharedLock { storage.totalCost } }

    /// The value for a key, its read counted for the eviction; `nil` when absent, or when its
    /// content was discarded and ``evictsObjectsWithDiscardedContent`` is set (the entry is then
    /// evicted and the delegate told).
    ///
    /// It takes the lock shared: reads on several threads run at once.
    ///
    /// - Parameter key: the entry's key.
    /// - Returns: the value, or `nil`.
    /// - Complexity: O(1).
    @inlinable
    public func object(forKey key: Key) -> Value? {
        let slot = lock.lockShared()
        // Through the pointer, not the `storage` property: through the property's addressor the
        // storage was copied for the borrow (measured at 20,000 entries: gets 1.28× a locked
        // Dictionary's, against 1.19× this way).
        let found = storageAddress.pointee.peek(key)
        lock.unlockShared(slot)
        switch found {
        case .hit(let value):
            return value
        case .miss:
            return nil
        case .discarded:
            lock.lock()
            let evicted = storage.removeIfDiscarded(key)
            let delegate = storedDelegate
            lock.unlock()
            if let evicted { delegate?.cache(self, willEvictObject: evicted as Any) }
            return nil
        }
    }

    /// Stores a value with cost 0.
    ///
    /// - Parameters:
    ///   - object: the value.
    ///   - key: the entry's key; a value already stored for it is replaced.
    /// - Complexity: O(1) amortized.
    @inlinable
    public func setObject(_ object: Value, forKey key: Key) {
        setObject(object, forKey: key, cost: 0)
    }

    /// Stores a value with a cost (its size in bytes, for memory accounting), then evicts
    /// while a limit is exceeded, in the policy's order (see Eviction) — never the value just
    /// stored, unless its own cost exceeds ``totalCostLimit``.
    ///
    /// - Parameters:
    ///   - object: the value.
    ///   - key: the entry's key; a value already stored for it is replaced.
    ///   - cost: the value's size in bytes (negative counts as 0).
    /// - Complexity: O(1) amortized, plus O(1) per evicted entry.
    @inlinable
    public func setObject(_ object: Value, forKey key: Key, cost: Int) {
        lock.lock()
        let content = storage.discardableContent(of: object)
        let evicted = storage.insert(object, content: content, forKey: key, cost: max(0, cost))
        guard !evicted.isEmpty else {
            lock.unlock()
            return
        }
        let delegate = storedDelegate
        lock.unlock()
        notify(delegate, evicted)
    }

    /// Removes the value for a key (the delegate is told).
    ///
    /// - Parameter key: the entry's key; no entry is no error.
    /// - Complexity: O(1).
    @inlinable
    public func removeObject(forKey key: Key) {
        lock.lock()
        guard let value = storage.removeValue(forKey: key) else {
            lock.unlock()
            return
        }
        let delegate = storedDelegate
        lock.unlock()
        delegate?.cache(self, willEvictObject: value as Any)
    }

    /// Removes every value (the delegate is told of each).
    ///
    /// - Complexity: O(n).
    @inlinable
    public func removeAllObjects() {
        lock.lock()
        let delegate = storedDelegate
        let values = storage.removeAll(keepingValues: delegate != nil)
        lock.unlock()
        notify(delegate, values)
    }

    @inlinable
    func notify(_ delegate: (any DiscardableCacheDelegate)?, _ values: [Value]) {
        guard let delegate else { return }
        for value in values { delegate.cache(self, willEvictObject: value as Any) }
    }

    func changeLimits(_ change: (inout CacheStorage<Key, Value>) -> Void) {
        lock.lock()
        change(&storage)
        let evicted = storage.evictOverLimits()
        let delegate = storedDelegate
        lock.unlock()
        notify(delegate, evicted)
    }
}

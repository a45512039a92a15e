import MemwarnTestFixtures
import MemwarnTestKit
import Testing

@testable import MemwarnRelease
@testable import MemwarnStores

/// The eviction policy (S3-FIFO) and the promises it keeps from `NSCache`: an object just set
/// can be read back unless its own cost exceeds the cost limit; the limits hold after every
/// set; the delegate hears of every value that leaves; content under access is never
/// discarded. The promises are checked after every operation of seeded random runs, at limits,
/// costs and orders no scenario picks by hand.
@Suite("DiscardableCache eviction policy")
struct DiscardableCacheEvictionPolicyTests {
    typealias EvictionLog = CacheFixtures.EvictionLog

    /// A value that knows which set stored it.
    final class Tagged: Sendable {
        let key: Int
        let serial: Int
        init(key: Int, serial: Int) {
            self.key = key
            self.serial = serial
        }
    }

    /// The value stored for a key, looked up without counting a read (the policy would see one).
    static func stored<Value>(_ cache: DiscardableCache<Int, Value>, _ key: Int) -> Value? {
        cache.lock.withLock {
            cache.storage.index[key].flatMap { cache.storage.values[Int($0)] }
        }
    }

    static func violations<Key, Value>(_ cache: DiscardableCache<Key, Value>) -> [String] {
        cache.lock.withLock { cache.storage.invariantViolations() }
    }

    /// The cost limit the cache keeps to: the lesser of its own and the trim's ceiling (0: none).
    static func costLimitKept<Key, Value>(_ cache: DiscardableCache<Key, Value>) -> Int {
        [cache.totalCostLimit, cache.trimCeilingBytes ?? 0].filter { $0 > 0 }.min() ?? 0
    }

    static let orders: [DiscardableCacheReleaseOrder] = [.balanced, .largestFirst, .coldestFirst]

    // MARK: The promises, under random operations

    @Test(arguments: 1...8)
    func everyPromiseHoldsAfterEveryOperation(seed: Int) {
        var random = SeededGenerator(seed: UInt64(seed) &* 0x9E37_79B9_7F4A_7C15)
        let cache = DiscardableCache<Int, Tagged>(coordinator: nil)
        let log = EvictionLog()
        cache.delegate = log
        var serial = 0
        var replaced = Set<Int>()
        var removedByUs = Set<Int>()
        var failures = 0
        for step in 0..<3_000 {
            let key = Int(random.next() % 96)
            switch random.next() % 100 {
            case 0..<50:
                serial += 1
                let value = Tagged(key: key, serial: serial)
                // The cost limit is sometimes below a cost: the promise's exception.
                let cost = random.next() % 8 == 0 ? 0 : Int(random.next() % 60)
                if let previous = Self.stored(cache, key) { replaced.insert(previous.serial) }
                cache.setObject(value, forKey: key, cost: cost)
                let limit = Self.costLimitKept(cache)
                if limit == 0 || cost <= limit {
                    // Read back half the time through the API (a read the policy counts), always
                    // through the storage (no read counted).
                    let readBack = random.next() % 2 == 0 ? cache.object(forKey: key) : Self.stored(cache, key)
                    if readBack !== value { failures += 1 }
                    #expect(readBack === value, "step \(step): the object just set for \(key) (cost \(cost), limit \(limit)) is not readable")
                } else {
                    #expect(Self.stored(cache, key) == nil, "step \(step): a value costlier than the limit was kept")
                }
                #expect(cache.countLimit == 0 || cache.count <= cache.countLimit, "step \(step): count \(cache.count) over \(cache.countLimit)")
                #expect(limit == 0 || cache.totalCost <= limit, "step \(step): cost \(cache.totalCost) over \(limit)")
            case 50..<78:
                if let value = cache.object(forKey: key) { #expect(value.key == key) }
            case 78..<86:
                if let value = Self.stored(cache, key) { removedByUs.insert(value.serial) }
                cache.removeObject(forKey: key)
            case 86..<92:
                // Tight limits half the time: a queue of one or two entries is where the
                // policy's corners are (a key back from the ghost alone in the main queue).
                let tight = random.next() % 2 == 0
                cache.countLimit = random.next() % 3 == 0 ? 0 : Int(1 + random.next() % (tight ? 4 : 48))
                cache.totalCostLimit = random.next() % 3 == 0 ? 0 : Int(random.next() % (tight ? 120 : 900))
                // The proactive trim's ceiling, now and then: the cache keeps to the lesser limit.
                if random.next() % 3 == 0 { cache.trimCeilingBytes = random.next() % 2 == 0 ? nil : Int(1 + random.next() % 900) }
                #expect(cache.countLimit == 0 || cache.count <= cache.countLimit)
                #expect(Self.costLimitKept(cache) == 0 || cache.totalCost <= Self.costLimitKept(cache))
            case 92..<99:
                cache.releaseOrder = Self.orders[Int(random.next() % 3)]
                let target = Int(random.next() % UInt64(max(1, cache.totalCost)))
                let costBefore = cache.totalCost
                let freed = cache.release(ReleaseRequest(level: .warning, tier: .caches, targetBytes: target))
                #expect(
                    freed >= min(target, costBefore) && cache.totalCost == costBefore - freed,
                    "step \(step): released \(freed) of \(costBefore) for a target of \(target)")
            default:
                cache.removeAllObjects()
                #expect(cache.count == 0 && cache.totalCost == 0)
            }
            let problems = Self.violations(cache)
            #expect(problems.isEmpty, "step \(step): \(problems)")
            if !problems.isEmpty || failures > 3 { break }
        }
        // Every value ever set is in the cache, was replaced by a set of its key, or was heard
        // of by the delegate — exactly one of these.
        let present = (0..<96).compactMap { Self.stored(cache, $0)?.serial }
        let heard = log.values(Tagged.self).map(\.serial)
        #expect(Set(heard).count == heard.count, "the delegate heard of a value twice")
        #expect(removedByUs.isSubset(of: Set(heard)), "a removeObject was not told")
        #expect(Set(present).isDisjoint(with: heard), "a value still cached was reported as evicted")
        #expect(replaced.isDisjoint(with: heard), "a replaced value was reported as evicted")
        #expect(Set(present).union(heard).union(replaced) == Set(1...serial), "a value left without the delegate hearing")
    }

    @Test(arguments: orders)
    func contentUnderAccessIsNeverDiscardedNorReleased(order: DiscardableCacheReleaseOrder) {
        var random = SeededGenerator(seed: 0xACCE55)
        let cache = DiscardableCache<Int, PurgeableData>(coordinator: nil)
        cache.releaseOrder = order
        cache.totalCostLimit = 64 * 40
        var inUse: [Int: PurgeableData] = [:]
        for step in 0..<4_000 {
            let key = Int(random.next() % 128)
            switch random.next() % 10 {
            case 0..<4:
                let data = PurgeableData(repeating: UInt8(truncatingIfNeeded: key), count: 64)
                data.endContentAccess()
                cache.setObject(data, forKey: key, cost: 64)
            case 4..<6:
                if inUse[key] == nil, let data = cache.object(forKey: key), data.beginContentAccess() { inUse[key] = data }
            case 6..<8:
                inUse.removeValue(forKey: key)?.endContentAccess()
            default:
                // A release keeps every entry in use where it is (a set over a limit may evict
                // one: its content stays intact with its user, checked below).
                let heldInCache = inUse.filter { Self.stored(cache, $0.key) === $0.value }
                _ = cache.release(ReleaseRequest(level: .warning, tier: .caches, targetBytes: Int(random.next() % 3_000)))
                for (held, data) in heldInCache {
                    #expect(Self.stored(cache, held) === data, "step \(step): a release removed an entry in use")
                }
            }
            for (held, data) in inUse {
                #expect(
                    !data.isContentDiscarded() && data.bytes?.allSatisfy { $0 == UInt8(truncatingIfNeeded: held) } == true,
                    "step \(step): content under access was discarded or changed")
            }
        }
        for data in inUse.values { data.endContentAccess() }
        #expect(Self.violations(cache).isEmpty)
    }

    @Test(arguments: orders)
    func aReleaseKeepsEveryEntryInUseAndFreesOnlyIdleOnes(order: DiscardableCacheReleaseOrder) {
        let cache = DiscardableCache<Int, PurgeableData>(coordinator: nil)
        cache.releaseOrder = order
        var held: [PurgeableData] = []
        for key in 0..<40 {
            let data = PurgeableData(repeating: 7, count: 100 + key)
            if key % 3 != 0 { data.endContentAccess() } else { held.append(data) }
            cache.setObject(data, forKey: key, cost: 100 + key)
        }
        let freed = cache.release(ReleaseRequest(level: .warning, tier: .caches, targetBytes: .max - 1))
        #expect(freed == (0..<40).filter { $0 % 3 != 0 }.reduce(0) { $0 + 100 + $1 })
        #expect((0..<40).filter { Self.stored(cache, $0) != nil } == (0..<40).filter { $0 % 3 == 0 })
        #expect(held.allSatisfy { !$0.isContentDiscarded() })
        for data in held { data.endContentAccess() }
    }

    // MARK: What S3-FIFO keeps

    @Test func aOneTimeScanDoesNotFlushEntriesReadAgain() {
        let cache = DiscardableCache<Int, Int>(coordinator: nil)
        cache.countLimit = 100
        let hot = Array(0..<50)
        for key in hot { cache.setObject(key, forKey: key) }
        for _ in 0..<2 { for key in hot { #expect(cache.object(forKey: key) == key) } }
        // 10,000 keys, each set once and never read: LRU would keep none of the hot set.
        for key in 1_000..<11_000 { cache.setObject(key, forKey: key) }
        #expect(hot.filter { cache.object(forKey: $0) == nil } == [])
        #expect(cache.count == 100)
    }

    @Test func aLoopSlightlyLargerThanTheCacheStillHits() {
        // LRU evicts each key just before it comes round again: no hit at all.
        let cache = DiscardableCache<Int, Int>(coordinator: nil)
        cache.countLimit = 100
        var hits = 0
        var requests = 0
        for round in 0..<20 {
            for key in 0..<110 {
                if cache.object(forKey: key) != nil {
                    if round > 0 { hits += 1 }
                } else {
                    cache.setObject(key, forKey: key)
                }
                if round > 0 { requests += 1 }
            }
        }
        #expect(Double(hits) / Double(requests) > 0.5, "\(hits) hits in \(requests) requests")
    }

    @Test func aKeyEvictedUnreadAndSetAgainSoonIsKeptOverNewcomers() {
        let cache = DiscardableCache<Int, Int>(coordinator: nil)
        cache.countLimit = 100
        for key in 0..<100 { cache.setObject(key, forKey: key) }
        for key in 0..<90 { _ = cache.object(forKey: key) }
        // Newcomers push key 90 (never read) out of the small queue: the ghost remembers it.
        var next = 1_000
        while Self.stored(cache, 90) != nil {
            cache.setObject(next, forKey: next)
            next += 1
        }
        cache.setObject(90, forKey: 90)
        // Back in the main queue, it outlives a stream of newcomers that fills the small queue
        // many times over.
        for key in next..<(next + 500) { cache.setObject(key, forKey: key) }
        #expect(Self.stored(cache, 90) == 90)
    }

    /// A key back from the ghost enters the main queue; when it is the main queue's only entry
    /// and the small queue is under its share, the eviction must still take from the small
    /// queue (it once went round the new entry for ever, holding the lock).
    @Test func aKeyBackFromTheGhostAloneInTheMainQueueEvictsFromTheSmallQueue() {
        let cache = DiscardableCache<String, String>(coordinator: nil)
        cache.countLimit = 1
        cache.setObject("a", forKey: "a")
        cache.setObject("b", forKey: "b")  // evicts "a", never read: the ghost remembers it
        cache.setObject("a again", forKey: "a")
        #expect(cache.count == 1)
        #expect(cache.object(forKey: "a") == "a again")
        #expect(cache.object(forKey: "b") == nil)
        #expect(Self.violations(cache).isEmpty)
    }

    /// The same under a cost limit: an entry in the main queue alone, set again costlier, with
    /// a cheap entry in the small queue (under its 5 % share of the bytes).
    @Test func anEntryAloneInTheMainQueueSetCostlierEvictsFromTheSmallQueue() {
        let cache = DiscardableCache<String, Int>(coordinator: nil)
        cache.totalCostLimit = 1_000
        cache.setObject(1, forKey: "b", cost: 10)
        _ = cache.object(forKey: "b")
        cache.setObject(2, forKey: "c", cost: 990)
        cache.setObject(3, forKey: "d", cost: 10)  // moves "b" (read) to the main queue, evicts "c"
        cache.setObject(4, forKey: "b", cost: 995)
        #expect(cache.object(forKey: "b") == 4)
        #expect(cache.object(forKey: "d") == nil)
        #expect(cache.totalCost == 995)
        #expect(Self.violations(cache).isEmpty)
    }

    @Test func manySmallNewcomersDoNotPushOutALargeEntryReadBefore() {
        // Under a cost limit the queues' shares are shares of bytes: the small queue holds 5 %
        // of them, so a stream of small newcomers, never read, churns there and leaves the
        // large entry read before alone (LRU would drop it after 600 newcomers).
        let cache = DiscardableCache<Int, Int>(coordinator: nil)
        cache.totalCostLimit = 10_000
        cache.setObject(0, forKey: 0, cost: 4_000)
        _ = cache.object(forKey: 0)
        for key in 1..<2_000 { cache.setObject(key, forKey: key, cost: 10) }
        #expect(Self.stored(cache, 0) == 0)
        #expect(cache.totalCost <= 10_000)
        #expect(Self.violations(cache).isEmpty)
    }

    // MARK: The order a release takes

    /// A (cost 100, never read), B (cost 500, read once), C (cost 300, never read): largest
    /// first takes B; coldest first takes A, the oldest entry never read; balanced takes C,
    /// the most bytes for its use (300 / 1 against 500 / 3 and 100 / 1).
    @Test(arguments: [(DiscardableCacheReleaseOrder.largestFirst, "B"), (.coldestFirst, "A"), (.balanced, "C")])
    func eachOrderTakesTheEntryItPromises(order: DiscardableCacheReleaseOrder, first: String) {
        let cache = DiscardableCache<String, Int>(coordinator: nil)
        cache.releaseOrder = order
        cache.setObject(100, forKey: "A", cost: 100)
        cache.setObject(500, forKey: "B", cost: 500)
        cache.setObject(300, forKey: "C", cost: 300)
        #expect(cache.object(forKey: "B") == 500)
        let log = EvictionLog()
        cache.delegate = log
        _ = cache.release(ReleaseRequest(level: .warning, tier: .caches, targetBytes: 1))
        #expect(log.values(Int.self) == [["A": 100, "B": 500, "C": 300][first]!])
        #expect(cache.count == 2)
    }

    /// Three caches read the same skewed trace over 1,000 keys of cost 10: one with a cost limit
    /// of 2,000; one with none that a release takes back to 2,000 after every set, as memwarn's
    /// releases hold a cache under the warning mark, in the default order; and the same released
    /// by priority (`.balanced`). The first two hold the same keys at every step, so they hit
    /// alike; the priority order, whose coldness the eviction never refreshes in a cache with no
    /// limit, hits less.
    @Test func releasesInTheDefaultOrderKeepWhatAFixedLimitKeeps() {
        var random = SeededGenerator(seed: 7)
        let limited = DiscardableCache<Int, Int>(coordinator: nil)
        limited.totalCostLimit = 2_000
        let released = DiscardableCache<Int, Int>(coordinator: nil)
        let balanced = DiscardableCache<Int, Int>(coordinator: nil)
        balanced.releaseOrder = .balanced
        var hits = [0, 0, 0]
        var firstDifference: Int?
        for step in 0..<20_000 {
            let uniform = Double(random.next() % 1_000_000) / 1_000_000
            let key = Int(uniform * uniform * uniform * 1_000)
            for (slot, cache) in [limited, released, balanced].enumerated() {
                if cache.object(forKey: key) != nil {
                    hits[slot] += 1
                    continue
                }
                cache.setObject(key, forKey: key, cost: 10)
                if cache.totalCost > 2_000 { _ = cache.release(ReleaseRequest(level: .warning, tier: .caches, targetBytes: cache.totalCost - 2_000)) }
            }
            let keys = [limited, released].map { cache in cache.lock.withLock { Set(cache.storage.index.keys) } }
            if firstDifference == nil && keys[0] != keys[1] { firstDifference = step }
        }
        #expect(firstDifference == nil, "the released cache first held other keys than the limited one at step \(firstDifference ?? -1)")
        #expect(hits[1] == hits[0], "\(hits)")
        #expect(hits[2] < hits[0], "balanced releases hit less than a fixed limit here: \(hits)")
        #expect(released.totalCost == 2_000 && Self.violations(released).isEmpty)
    }

    @Test func theDefaultOrderIsTheEvictionsOwn() {
        #expect(DiscardableCache<Int, Int>(coordinator: nil).releaseOrder == .coldestFirst)
    }
}

import MemwarnTestFixtures
import Testing

@testable import MemwarnRelease
@testable import MemwarnStores

/// `NSCache`'s documented behaviour, as `DiscardableCache` must reproduce it — except the
/// eviction order, which NSCache leaves undocumented: the cache evicts by S3-FIFO (first in,
/// first out, unless read since it came), where Foundation on Linux evicts the cheapest entry.
@Suite("DiscardableCache behaves like NSCache")
struct DiscardableCacheBehaviourTests {
    typealias EvictionLog = CacheFixtures.EvictionLog

    // MARK: Defaults and simple storage

    @Test func aNewCacheIsEmptyUnlimitedAndUnnamed() {
        let cache = DiscardableCache<String, Int>(coordinator: nil)
        #expect(cache.count == 0)
        #expect(cache.totalCost == 0)
        #expect(cache.countLimit == 0)
        #expect(cache.totalCostLimit == 0)
        #expect(cache.name == "")
        #expect(cache.evictsObjectsWithDiscardedContent)
        #expect(cache.delegate == nil)
        #expect(cache.object(forKey: "missing") == nil)
    }

    @Test func theNameCanBeSetAndReadBack() {
        let cache = DiscardableCache<String, Int>(coordinator: nil)
        cache.name = "thumbnails"
        #expect(cache.name == "thumbnails")
    }

    @Test func aStoredValueIsReturnedForItsKey() {
        let cache = DiscardableCache<String, Int>(coordinator: nil)
        cache.setObject(1, forKey: "one")
        cache.setObject(2, forKey: "two", cost: 20)
        #expect(cache.object(forKey: "one") == 1)
        #expect(cache.object(forKey: "two") == 2)
        #expect(cache.count == 2)
        #expect(cache.totalCost == 20)
    }

    @Test func setObjectWithoutACostCostsNothing() {
        let cache = DiscardableCache<Int, String>(coordinator: nil)
        cache.setObject("a", forKey: 1)
        #expect(cache.totalCost == 0)
        #expect(cache.count == 1)
    }

    @Test func aNegativeCostCountsAsZero() {
        let cache = DiscardableCache<Int, String>(coordinator: nil)
        cache.setObject("a", forKey: 1, cost: -50)
        #expect(cache.totalCost == 0)
    }

    @Test func settingAnExistingKeyReplacesTheValueAndItsCost() {
        let cache = DiscardableCache<String, String>(coordinator: nil)
        cache.setObject("first", forKey: "k", cost: 10)
        cache.setObject("other", forKey: "o", cost: 5)
        cache.setObject("second", forKey: "k", cost: 3)
        #expect(cache.object(forKey: "k") == "second")
        #expect(cache.count == 2)
        #expect(cache.totalCost == 8)
        cache.setObject("third", forKey: "k", cost: 40)
        #expect(cache.totalCost == 45)
    }

    // MARK: countLimit

    @Test func aCountLimitOfZeroMeansNoLimit() {
        let cache = DiscardableCache<Int, Int>(coordinator: nil)
        cache.countLimit = 0
        for key in 0..<1_000 { cache.setObject(key, forKey: key) }
        #expect(cache.count == 1_000)
    }

    @Test func exceedingTheCountLimitEvictsDownToTheLimit() {
        let cache = DiscardableCache<Int, Int>(coordinator: nil)
        cache.countLimit = 3
        for key in 0..<10 { cache.setObject(key, forKey: key) }
        #expect(cache.count == 3)
        #expect((0..<10).filter { cache.object(forKey: $0) != nil } == [7, 8, 9])
    }

    @Test func loweringTheCountLimitEvictsTheOldestEntriesAtOnce() {
        let cache = DiscardableCache<Int, Int>(coordinator: nil)
        let log = EvictionLog()
        cache.delegate = log
        for key in 0..<5 { cache.setObject(key * 10, forKey: key) }
        cache.countLimit = 2
        #expect(cache.count == 2)
        #expect(log.values(Int.self) == [0, 10, 20])
        #expect(cache.object(forKey: 3) == 30 && cache.object(forKey: 4) == 40)
    }

    @Test func aNegativeCountLimitMeansNoLimit() {
        let cache = DiscardableCache<Int, Int>(coordinator: nil)
        cache.countLimit = -3
        #expect(cache.countLimit == 0)
        for key in 0..<10 { cache.setObject(key, forKey: key) }
        #expect(cache.count == 10)
    }

    // MARK: The proactive trim's ceiling and refill count

    @Test func theTrimsCeilingEvictsAtOnceAndTheCacheKeepsToTheLesserLimit() {
        let cache = DiscardableCache<Int, Int>(coordinator: nil)
        let log = CacheFixtures.EvictionLog()
        cache.delegate = log
        for key in 0..<10 { cache.setObject(key, forKey: key, cost: 10) }
        cache.totalCostLimit = 80
        #expect(cache.totalCost == 80)
        cache.trimCeilingBytes = 55
        #expect(cache.totalCost <= 55 && cache.count == 5, "the ceiling evicts at once")
        #expect(log.values(Int.self).count == 5, "the delegate hears of every eviction")
        #expect(cache.totalCostLimit == 80, "the cache's own limit still reads what was set")
        #expect(cache.trimCeilingBytes == 55)
        for key in 10..<20 { cache.setObject(key, forKey: key, cost: 10) }
        #expect(cache.totalCost <= 55, "sets keep to the ceiling")
        cache.totalCostLimit = 30
        #expect(cache.totalCost <= 30, "the lesser limit binds")
        cache.totalCostLimit = 0
        for key in 20..<30 { cache.setObject(key, forKey: key, cost: 10) }
        #expect(cache.totalCost <= 55, "with no limit of its own, the ceiling alone")
        cache.trimCeilingBytes = nil
        for key in 30..<40 { cache.setObject(key, forKey: key, cost: 10) }
        #expect(cache.trimCeilingBytes == nil && cache.totalCost > 55, "lifted")
        cache.trimCeilingBytes = 0
        #expect(cache.trimCeilingBytes == nil, "0 is no ceiling")
    }

    @Test func theRefillCountCountsSetsOfKeysTheCacheDidNotHold() {
        let cache = DiscardableCache<Int, Int>(coordinator: nil)
        cache.countLimit = 4
        for key in 0..<4 { cache.setObject(key, forKey: key) }
        #expect(cache.refillCount == 4)
        cache.setObject(99, forKey: 2)
        #expect(cache.refillCount == 4, "a set of a key held is no refill")
        cache.setObject(5, forKey: 5)  // evicts one
        cache.removeObject(forKey: 5)
        cache.setObject(5, forKey: 5)
        #expect(cache.refillCount == 6)
        _ = cache.object(forKey: 1)
        _ = cache.object(forKey: 1_000)
        #expect(cache.refillCount == 6, "reads count nothing")
    }

    // MARK: totalCostLimit

    @Test func aTotalCostLimitOfZeroMeansNoLimit() {
        let cache = DiscardableCache<Int, Int>(coordinator: nil)
        cache.totalCostLimit = 0
        for key in 0..<100 { cache.setObject(key, forKey: key, cost: 1_000_000) }
        #expect(cache.count == 100)
        #expect(cache.totalCost == 100_000_000)
    }

    @Test func exceedingTheTotalCostLimitEvictsUntilTheCostFits() {
        let cache = DiscardableCache<String, String>(coordinator: nil)
        cache.totalCostLimit = 10
        cache.setObject("a", forKey: "a", cost: 4)
        cache.setObject("b", forKey: "b", cost: 4)
        #expect(cache.count == 2)
        cache.setObject("c", forKey: "c", cost: 4)
        #expect(cache.count == 2)
        #expect(cache.totalCost == 8)
        #expect(cache.object(forKey: "a") == nil)
    }

    @Test func loweringTheTotalCostLimitEvictsAtOnce() {
        let cache = DiscardableCache<Int, Int>(coordinator: nil)
        for key in 0..<4 { cache.setObject(key, forKey: key, cost: 10) }
        cache.totalCostLimit = 25
        #expect(cache.count == 2)
        #expect(cache.totalCost == 20)
        #expect(cache.totalCostLimit == 25)
    }

    @Test func aValueCostlierThanTheWholeLimitIsNotKept() {
        let cache = DiscardableCache<String, String>(coordinator: nil)
        let log = EvictionLog()
        cache.delegate = log
        cache.totalCostLimit = 10
        cache.setObject("huge", forKey: "huge", cost: 11)
        #expect(cache.count == 0)
        #expect(cache.totalCost == 0)
        #expect(log.values(String.self) == ["huge"])
    }

    @Test func replacingAValueWithACostlierOneEvictsOthersNotTheReplacement() {
        let cache = DiscardableCache<String, String>(coordinator: nil)
        cache.totalCostLimit = 10
        cache.setObject("a", forKey: "a", cost: 3)
        cache.setObject("b", forKey: "b", cost: 3)
        cache.setObject("a2", forKey: "a", cost: 8)
        #expect(cache.object(forKey: "b") == nil)
        #expect(cache.object(forKey: "a") == "a2")
        #expect(cache.totalCost == 8)
    }

    // MARK: Eviction order (S3-FIFO: first in, first out, unless read since it came)

    @Test func theOldestUnreadEntryIsEvictedFirst() {
        let cache = DiscardableCache<String, String>(coordinator: nil)
        let log = EvictionLog()
        cache.delegate = log
        cache.countLimit = 3
        for key in ["a", "b", "c"] { cache.setObject(key, forKey: key) }
        cache.setObject("d", forKey: "d")
        #expect(log.values(String.self) == ["a"])
        cache.setObject("e", forKey: "e")
        #expect(log.values(String.self) == ["a", "b"])
    }

    @Test func anEntryReadSinceItCameIsKeptOverAnUnreadOne() {
        let cache = DiscardableCache<String, String>(coordinator: nil)
        let log = EvictionLog()
        cache.delegate = log
        cache.countLimit = 3
        for key in ["a", "b", "c"] { cache.setObject(key, forKey: key) }
        #expect(cache.object(forKey: "a") == "a")
        cache.setObject("d", forKey: "d")
        #expect(log.values(String.self) == ["b"])
        #expect(cache.object(forKey: "a") == "a")
    }

    @Test func settingAnEntryAgainCountsAsARead() {
        let cache = DiscardableCache<String, String>(coordinator: nil)
        let log = EvictionLog()
        cache.delegate = log
        cache.countLimit = 3
        for key in ["a", "b", "c"] { cache.setObject(key, forKey: key) }
        cache.setObject("A", forKey: "a")
        cache.setObject("d", forKey: "d")
        #expect(log.values(String.self) == ["b"])
    }

    @Test func costEvictionFollowsTheQueueNotCheapness() {
        // Foundation on Linux would evict "b" (the cheapest) and keep the total at 10.
        let cache = DiscardableCache<String, String>(coordinator: nil)
        let log = EvictionLog()
        cache.delegate = log
        cache.totalCostLimit = 10
        cache.setObject("a", forKey: "a", cost: 5)
        cache.setObject("b", forKey: "b", cost: 1)
        cache.setObject("c", forKey: "c", cost: 5)
        #expect(log.values(String.self) == ["a"])
        #expect(cache.totalCost == 6)
        #expect(cache.object(forKey: "b") == "b")
    }

    @Test func missesAndRemovalsDoNotDisturbTheOrder() {
        let cache = DiscardableCache<Int, Int>(coordinator: nil)
        let log = EvictionLog()
        cache.countLimit = 3
        for key in 1...3 { cache.setObject(key, forKey: key) }
        #expect(cache.object(forKey: 99) == nil)
        cache.removeObject(forKey: 2)
        cache.delegate = log
        cache.setObject(4, forKey: 4)
        cache.setObject(5, forKey: 5)
        #expect(log.values(Int.self) == [1])
        #expect(cache.object(forKey: 3) == 3 && cache.object(forKey: 4) == 4 && cache.object(forKey: 5) == 5)
    }

    // MARK: Removal

    @Test func removeObjectRemovesOnlyThatKeyAndItsCost() {
        let cache = DiscardableCache<String, Int>(coordinator: nil)
        cache.setObject(1, forKey: "a", cost: 10)
        cache.setObject(2, forKey: "b", cost: 20)
        cache.removeObject(forKey: "a")
        #expect(cache.object(forKey: "a") == nil)
        #expect(cache.object(forKey: "b") == 2)
        #expect(cache.count == 1)
        #expect(cache.totalCost == 20)
    }

    @Test func removingAMissingKeyDoesNothingAndTellsNoOne() {
        let cache = DiscardableCache<String, Int>(coordinator: nil)
        let log = EvictionLog()
        cache.delegate = log
        cache.setObject(1, forKey: "a", cost: 10)
        cache.removeObject(forKey: "b")
        #expect(cache.count == 1)
        #expect(log.objects.isEmpty)
    }

    @Test func removeAllObjectsEmptiesTheCacheAndItStaysUsable() {
        let cache = DiscardableCache<Int, Int>(coordinator: nil)
        cache.countLimit = 4
        for key in 0..<10 { cache.setObject(key, forKey: key, cost: key) }
        cache.removeAllObjects()
        #expect(cache.count == 0)
        #expect(cache.totalCost == 0)
        #expect((0..<10).allSatisfy { cache.object(forKey: $0) == nil })
        for key in 0..<6 { cache.setObject(key, forKey: key, cost: 1) }
        #expect(cache.count == 4)
        #expect(cache.totalCost == 4)
        #expect(cache.object(forKey: 5) == 5)
        #expect(cache.object(forKey: 1) == nil)
    }

    // MARK: Delegate

    @Test func theDelegateIsToldOfEachLimitEvictionWithTheEvictedValue() {
        let cache = DiscardableCache<Int, String>(coordinator: nil)
        let log = EvictionLog()
        cache.delegate = log
        cache.countLimit = 2
        cache.setObject("zero", forKey: 0)
        cache.setObject("one", forKey: 1)
        cache.setObject("two", forKey: 2)
        cache.setObject("three", forKey: 3)
        #expect(log.values(String.self) == ["zero", "one"])
        #expect(log.caches.allSatisfy { $0 == ObjectIdentifier(cache) })
    }

    @Test func theDelegateIsToldOfRemoveObject() {
        let cache = DiscardableCache<Int, String>(coordinator: nil)
        let log = EvictionLog()
        cache.delegate = log
        cache.setObject("zero", forKey: 0)
        cache.setObject("one", forKey: 1)
        cache.removeObject(forKey: 1)
        #expect(log.values(String.self) == ["one"])
    }

    @Test func theDelegateIsToldOfEveryValueRemoveAllObjectsDrops() {
        let cache = DiscardableCache<Int, String>(coordinator: nil)
        let log = EvictionLog()
        for key in 0..<5 { cache.setObject("v\(key)", forKey: key) }
        cache.removeObject(forKey: 2)
        cache.delegate = log
        cache.removeAllObjects()
        #expect(Set(log.values(String.self)) == ["v0", "v1", "v3", "v4"])
        #expect(log.objects.count == 4)
    }

    @Test func theDelegateIsNotToldOfAReplacementOrARead() {
        let cache = DiscardableCache<Int, String>(coordinator: nil)
        let log = EvictionLog()
        cache.delegate = log
        cache.setObject("a", forKey: 0)
        cache.setObject("b", forKey: 0)
        _ = cache.object(forKey: 0)
        _ = cache.object(forKey: 1)
        #expect(log.objects.isEmpty)
    }

    @Test func theDelegateIsHeldWeakly() {
        let cache = DiscardableCache<Int, String>(coordinator: nil)
        weak var weakLog: EvictionLog?
        do {
            let log = EvictionLog()
            weakLog = log
            cache.delegate = log
            #expect(cache.delegate === log)
        }
        #expect(weakLog == nil)
        #expect(cache.delegate == nil)
        cache.setObject("a", forKey: 0)
        cache.removeObject(forKey: 0)
        #expect(cache.count == 0)
    }

    @Test func aDelegateThatReadsAndWritesTheCacheDoesNotDeadlock() async {
        let finished = await CacheFixtures.finishes {
            let cache = DiscardableCache<Int, String>(coordinator: nil)
            let log = EvictionLog()
            var reinserted = false
            log.onEvict = { object in
                // Every cache call from inside the callback: a deadlock hangs here.
                _ = cache.count
                _ = cache.object(forKey: 100)
                _ = cache.totalCost
                _ = cache.discardedBytes
                cache.name = "touched"
                if !reinserted, let value = object as? String {
                    reinserted = true
                    cache.setObject(value + "-again", forKey: 100, cost: 1)
                }
            }
            cache.delegate = log
            cache.countLimit = 2
            cache.setObject("a", forKey: 1)
            cache.setObject("b", forKey: 2)
            cache.setObject("c", forKey: 3)  // evicts "a"; the callback inserts 100, evicting "b"
            cache.removeObject(forKey: 3)
            cache.removeAllObjects()
            _ = cache.release(ReleaseRequest(level: .warning, tier: .caches, targetBytes: .max))
            cache.setObject("z", forKey: 9, cost: 1)
            _ = cache.release(ReleaseRequest(level: .critical, tier: .caches, targetBytes: .max))
        }
        #expect(finished, "a delegate calling back into the cache deadlocked")
    }

    @Test func aDelegateThatReinsertsTheEvictedValueSeesItStored() {
        let cache = DiscardableCache<Int, String>(coordinator: nil)
        let log = EvictionLog()
        log.onEvict = { object in
            if let value = object as? String, value == "keep" { cache.setObject(value, forKey: 42) }
        }
        cache.delegate = log
        cache.setObject("keep", forKey: 1)
        cache.removeObject(forKey: 1)
        #expect(cache.object(forKey: 1) == nil)
        #expect(cache.object(forKey: 42) == "keep")
    }

    // MARK: Discarded content

    @Test func evictsObjectsWithDiscardedContentDefaultsToTrueAndAReadEvictsTheValue() {
        let cache = DiscardableCache<String, PurgeableData>(coordinator: nil)
        let log = EvictionLog()
        cache.delegate = log
        let data = CacheFixtures.discardedData()
        cache.setObject(data, forKey: "gone", cost: 8)
        #expect(cache.evictsObjectsWithDiscardedContent)
        #expect(cache.object(forKey: "gone") == nil)
        #expect(cache.count == 0)
        #expect(cache.totalCost == 0)
        #expect(log.values(PurgeableData.self).map { ObjectIdentifier($0) } == [ObjectIdentifier(data)])
    }

    @Test func contentDiscardedAfterStoringIsEvictedOnTheNextRead() {
        let cache = DiscardableCache<String, PurgeableData>(coordinator: nil)
        let data = CacheFixtures.idleData()
        cache.setObject(data, forKey: "k", cost: 8)
        #expect(cache.object(forKey: "k") === data)
        data.discardContentIfPossible()
        #expect(cache.object(forKey: "k") == nil)
        #expect(cache.count == 0)
    }

    @Test func discardedContentIsReturnedWhenEvictionOfDiscardedContentIsOff() {
        let cache = DiscardableCache<String, PurgeableData>(coordinator: nil)
        cache.evictsObjectsWithDiscardedContent = false
        #expect(!cache.evictsObjectsWithDiscardedContent)
        let data = CacheFixtures.discardedData()
        cache.setObject(data, forKey: "gone", cost: 8)
        let read = cache.object(forKey: "gone")
        #expect(read === data)
        #expect(read?.isContentDiscarded() == true)
        #expect(read?.beginContentAccess() == false)
        #expect(cache.count == 1)
        #expect(cache.totalCost == 8)
    }

    @Test func contentStillPresentIsReturnedAndUsable() {
        let cache = DiscardableCache<String, PurgeableData>(coordinator: nil)
        let data = CacheFixtures.idleData(count: 4, byte: 7)
        cache.setObject(data, forKey: "k", cost: 4)
        let read = cache.object(forKey: "k")
        #expect(read?.beginContentAccess() == true)
        #expect(read?.bytes == [7, 7, 7, 7])
        read?.endContentAccess()
    }

    @Test func discardableContentIsRecognisedThroughAnExistentialValueType() {
        let cache = DiscardableCache<Int, AnyObject>(coordinator: nil)
        cache.setObject(CacheFixtures.discardedData(), forKey: 1, cost: 8)
        cache.setObject(CacheFixtures.Payload(key: 2), forKey: 2, cost: 8)
        #expect(cache.discardedBytes == 8)
        #expect(cache.object(forKey: 1) == nil)
        #expect(cache.object(forKey: 2) != nil)
    }

    @Test func replacingDiscardedContentWithPlainContentStopsCountingItAsDiscarded() {
        let cache = DiscardableCache<Int, AnyObject>(coordinator: nil)
        cache.setObject(CacheFixtures.discardedData(), forKey: 1, cost: 8)
        #expect(cache.discardedBytes == 8)
        cache.setObject(CacheFixtures.Payload(key: 1), forKey: 1, cost: 8)
        #expect(cache.discardedBytes == 0)
        #expect(cache.object(forKey: 1) is CacheFixtures.Payload)
    }

    // MARK: Keys

    @Test func integerKeysAreComparedByValue() {
        let cache = DiscardableCache<Int, String>(coordinator: nil)
        cache.setObject("minus", forKey: -1)
        cache.setObject("big", forKey: Int.max)
        #expect(cache.object(forKey: -1) == "minus")
        #expect(cache.object(forKey: Int.max) == "big")
        #expect(cache.object(forKey: 0) == nil)
    }

    @Test func stringKeysAreComparedByValueNotByStorage() {
        let cache = DiscardableCache<String, Int>(coordinator: nil)
        let built = String(["c", "a", "f", "é"])
        cache.setObject(1, forKey: built)
        #expect(cache.object(forKey: "café") == 1)
        // Canonically equivalent strings are equal in Swift, so they are one key.
        #expect(cache.object(forKey: "cafe\u{301}") == 1)
        cache.setObject(2, forKey: "cafe\u{301}")
        #expect(cache.count == 1)
        #expect(cache.object(forKey: "café") == 2)
    }

    @Test func structKeysAreComparedByValue() {
        typealias Key = CacheFixtures.CompositeKey
        let cache = DiscardableCache<Key, String>(coordinator: nil)
        cache.setObject("a1", forKey: Key(bucket: "a", number: 1))
        cache.setObject("a2", forKey: Key(bucket: "a", number: 2))
        #expect(cache.object(forKey: Key(bucket: "a", number: 1)) == "a1")
        #expect(cache.object(forKey: Key(bucket: "b", number: 1)) == nil)
        cache.setObject("A1", forKey: Key(bucket: "a", number: 1))
        #expect(cache.count == 2)
        #expect(cache.object(forKey: Key(bucket: "a", number: 1)) == "A1")
    }

    @Test func referenceKeysAreComparedByIdentity() {
        typealias Key = CacheFixtures.IdentityKey
        let cache = DiscardableCache<Key, String>(coordinator: nil)
        let first = Key("same label")
        let second = Key("same label")
        cache.setObject("first", forKey: first)
        cache.setObject("second", forKey: second)
        #expect(cache.count == 2)
        #expect(cache.object(forKey: first) == "first")
        #expect(cache.object(forKey: second) == "second")
        #expect(cache.object(forKey: Key("same label")) == nil)
        cache.removeObject(forKey: first)
        #expect(cache.object(forKey: second) == "second")
        #expect(cache.count == 1)
    }

    // MARK: Registration

    @Test func aCacheJoinsTheCoordinatorItIsGivenAndLeavesWhenDeallocated() {
        let coordinator = ReleaseCoordinator(trimsHeap: false)
        do {
            let cache = DiscardableCache<Int, Int>(coordinator: coordinator)
            #expect(coordinator.consumers.count == 1)
            #expect(coordinator.consumers.first === cache.memoryConsumer, "the cache's consumer stands for it")
            #expect(coordinator.consumers.first?.name == cache.name)
            #expect(cache.tier == .caches)
        }
        #expect(coordinator.consumers.isEmpty)
    }

    @Test func aCacheCreatedWithoutACoordinatorJoinsNone() {
        let coordinator = ReleaseCoordinator(trimsHeap: false)
        let cache = DiscardableCache<Int, Int>(coordinator: nil)
        cache.setObject(1, forKey: 1, cost: 100)
        #expect(coordinator.consumers.isEmpty)
        #expect(coordinator.release(level: .critical, targetBytes: .max).entries.isEmpty)
        #expect(cache.count == 1)
    }
}

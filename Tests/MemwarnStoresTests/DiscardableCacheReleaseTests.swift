import MemwarnTestFixtures
import Testing

@testable import MemwarnRelease
@testable import MemwarnStores

/// What a `DiscardableCache` gives back when a coordinator asks it to release memory.
@Suite("DiscardableCache releases memory")
struct DiscardableCacheReleaseTests {
    typealias EvictionLog = CacheFixtures.EvictionLog

    static func caches(_ bytes: Int, level: MemoryPressureLevel = .warning) -> ReleaseRequest {
        ReleaseRequest(level: level, tier: .caches, targetBytes: bytes)
    }

    static let discardedOnly = ReleaseRequest(level: .warning, tier: .discarded, targetBytes: .max)

    /// A cache holding the given costs under keys "c<cost>", releasing in `order` (the default's
    /// when `nil`).
    static func cache(costs: [Int], order: DiscardableCacheReleaseOrder? = nil) -> DiscardableCache<String, Int> {
        let cache = DiscardableCache<String, Int>(coordinator: nil)
        if let order { cache.releaseOrder = order }
        for cost in costs { cache.setObject(cost, forKey: "c\(cost)", cost: cost) }
        return cache
    }

    static func remainingCosts(_ cache: DiscardableCache<String, Int>, of costs: [Int]) -> [Int] {
        costs.filter { cache.object(forKey: "c\($0)") != nil }.sorted()
    }

    // MARK: Tier .caches

    @Test func balancedAmongEntriesEquallyColdTakesTheLargestFirstAndStopsOnceTheTargetIsMet() {
        let costs = [10, 50, 30, 20, 40]
        let cache = Self.cache(costs: costs, order: .balanced)
        let freed = cache.release(Self.caches(60))
        #expect(freed == 90)  // 50, then 40: 90 >= 60
        #expect(Self.remainingCosts(cache, of: costs) == [10, 20, 30])
        #expect(cache.totalCost == 60)
        #expect(cache.count == 3)
    }

    @Test func balancedTakesOnlyTheLargestOfEquallyColdEntriesWhenItMeetsTheTarget() {
        let costs = [10, 50, 30]
        let cache = Self.cache(costs: costs, order: .balanced)
        #expect(cache.release(Self.caches(50)) == 50)
        #expect(Self.remainingCosts(cache, of: costs) == [10, 30])
    }

    @Test func largestFirstIgnoresRecency() {
        let cache = DiscardableCache<String, Int>(coordinator: nil)
        cache.releaseOrder = .largestFirst
        cache.setObject(1, forKey: "old-small", cost: 1)
        cache.setObject(2, forKey: "new-large", cost: 100)
        _ = cache.object(forKey: "new-large")
        #expect(cache.release(Self.caches(1)) == 100)
        #expect(cache.object(forKey: "old-small") == 1)
        #expect(cache.object(forKey: "new-large") == nil)
    }

    @Test func aTargetAboveTheTotalCostEmptiesTheCache() {
        let costs = [10, 50, 30]
        let cache = Self.cache(costs: costs)
        let log = EvictionLog()
        cache.delegate = log
        #expect(cache.release(Self.caches(.max)) == 90)
        #expect(cache.count == 0)
        #expect(cache.totalCost == 0)
        #expect(log.values(Int.self).sorted() == costs.sorted())
        cache.setObject(7, forKey: "again", cost: 7)
        #expect(cache.count == 1 && cache.totalCost == 7)
    }

    @Test func aZeroTargetReleasesNothingFromACacheWithCosts() {
        let costs = [10, 50]
        let cache = Self.cache(costs: costs)
        #expect(cache.release(Self.caches(0)) == 0)
        #expect(cache.count == 2)
    }

    @Test func aZeroTargetReleasesNothingEvenWhenEveryEntryCostsNothing() {
        // NSCache's default setObject(_:forKey:) stores cost 0; asking for 0 bytes must not
        // wipe such a cache.
        let cache = DiscardableCache<Int, String>(coordinator: nil)
        for key in 0..<3 { cache.setObject("v\(key)", forKey: key) }
        let freed = cache.release(Self.caches(0))
        #expect(freed == 0)
        #expect(cache.count == 3)
    }

    @Test func theDelegateIsToldOfEveryReleasedValue() {
        let cache = Self.cache(costs: [10, 50, 30], order: .balanced)
        let log = EvictionLog()
        cache.delegate = log
        _ = cache.release(Self.caches(70))
        #expect(log.values(Int.self) == [50, 30])
    }

    @Test func releaseWorksTheSameAtEveryLevelAndForOtherTiers() {
        for request in [Self.caches(60, level: .critical), ReleaseRequest(level: .warning, tier: .media, targetBytes: 60)] {
            let costs = [10, 50, 30]
            let cache = Self.cache(costs: costs, order: .balanced)
            #expect(cache.release(request) == 80)
            #expect(Self.remainingCosts(cache, of: costs) == [10])
        }
    }

    @Test func contentInUseIsNeverReleased() {
        let cache = DiscardableCache<String, PurgeableData>(coordinator: nil)
        let inUse = PurgeableData(bytes: [1, 2, 3])  // created in use
        let alsoInUse = CacheFixtures.idleData()
        #expect(alsoInUse.beginContentAccess())
        let idle = CacheFixtures.idleData()
        cache.setObject(inUse, forKey: "in-use", cost: 300)
        cache.setObject(alsoInUse, forKey: "also-in-use", cost: 200)
        cache.setObject(idle, forKey: "idle", cost: 100)
        #expect(cache.release(Self.caches(.max)) == 100)
        #expect(cache.count == 2)
        #expect(cache.totalCost == 500)
        #expect(!inUse.isContentDiscarded())
        #expect(inUse.bytes == [1, 2, 3])
        #expect(idle.isContentDiscarded())
        #expect(cache.object(forKey: "idle") == nil)
        #expect(cache.object(forKey: "in-use") === inUse)
    }

    @Test func releasingEverythingKeepsOnlyContentInUseInItsOrder() {
        let cache = DiscardableCache<String, AnyObject>(coordinator: nil)
        let busyOld = PurgeableData(bytes: [1])  // created in use
        let busyNew = PurgeableData(bytes: [2])
        let idle = CacheFixtures.idleData()
        cache.setObject(busyOld, forKey: "busy-old", cost: 5)
        cache.setObject(CacheFixtures.Payload(key: 1), forKey: "plain", cost: 7)
        cache.setObject(idle, forKey: "idle", cost: 11)
        cache.setObject(busyNew, forKey: "busy-new", cost: 13)
        #expect(cache.release(Self.caches(.max)) == 18)
        #expect(cache.count == 2)
        #expect(cache.totalCost == 18)
        #expect(idle.isContentDiscarded())
        // The kept entries are still linked oldest to newest: a count limit of 1 evicts the older.
        cache.countLimit = 1
        #expect(cache.object(forKey: "busy-old") == nil)
        #expect(cache.object(forKey: "busy-new") === busyNew)
        busyNew.endContentAccess()
        #expect(cache.release(Self.caches(.max)) == 13)
        #expect(cache.count == 0)
        #expect(cache.totalCost == 0)
    }

    /// Releasing everything frees purgeable blocks page by page in a batch; a block in use
    /// among them must stay intact, and every other entry's content must be discarded.
    @Test func releasingEverythingDiscardsPurgeableDataAcrossRegionsAndKeepsTheBlockInUse() {
        let cache = DiscardableCache<Int, PurgeableData>(coordinator: nil)
        let size = 2_000  // 6,000 of them fill several 2 MiB regions
        let entries = (0..<6_000).map { key in
            let data = PurgeableData(repeating: UInt8(truncatingIfNeeded: key) | 1, count: size)
            data.endContentAccess()
            return data
        }
        let busyKey = 3_001
        #expect(entries[busyKey].beginContentAccess())
        for (key, data) in entries.enumerated() { cache.setObject(data, forKey: key, cost: size) }

        #expect(cache.release(Self.caches(.max)) == (entries.count - 1) * size)
        #expect(cache.count == 1)
        #expect(entries.indices.allSatisfy { entries[$0].isContentDiscarded() == ($0 != busyKey) })
        #expect(entries[busyKey].bytes == [UInt8](repeating: UInt8(truncatingIfNeeded: busyKey) | 1, count: size))
        #expect(entries[busyKey - 1].bytes == nil && entries[busyKey + 1].bytes == nil)
        entries[busyKey].endContentAccess()
        #expect(cache.release(Self.caches(.max)) == size)
    }

    @Test func releasingEverythingIdleEmptiesTheCacheAndItFillsAgain() {
        let cache = DiscardableCache<Int, PurgeableData>(coordinator: nil)
        let entries = (0..<100).map { _ in CacheFixtures.idleData() }
        for (key, data) in entries.enumerated() { cache.setObject(data, forKey: key, cost: key + 1) }
        #expect(cache.release(Self.caches(.max)) == 5_050)
        #expect(cache.count == 0)
        #expect(entries.allSatisfy { $0.isContentDiscarded() })
        let again = PurgeableData(bytes: [4])
        cache.setObject(again, forKey: 1, cost: 1)
        #expect(cache.object(forKey: 1) === again)
        #expect(cache.release(Self.caches(.max)) == 0)  // in use
        again.endContentAccess()
        #expect(cache.release(Self.caches(.max)) == 1)
    }

    @Test func contentReleasedOnceItsAccessEnds() {
        let cache = DiscardableCache<String, PurgeableData>(coordinator: nil)
        let data = PurgeableData(bytes: [1])
        cache.setObject(data, forKey: "k", cost: 10)
        #expect(cache.release(Self.caches(10)) == 0)
        #expect(cache.count == 1)
        data.endContentAccess()
        #expect(cache.release(Self.caches(10)) == 10)
        #expect(cache.count == 0)
        #expect(data.isContentDiscarded())
    }

    @Test func aLargeEntryInUseIsSkippedForSmallerOnesUntilTheTargetIsMet() {
        let cache = DiscardableCache<String, AnyObject>(coordinator: nil)
        let busy = PurgeableData(bytes: [0])
        cache.setObject(busy, forKey: "busy", cost: 1_000)
        cache.setObject(CacheFixtures.Payload(key: 1), forKey: "p300", cost: 300)
        cache.setObject(CacheFixtures.Payload(key: 2), forKey: "p200", cost: 200)
        cache.setObject(CacheFixtures.Payload(key: 3), forKey: "p100", cost: 100)
        #expect(cache.release(Self.caches(400)) == 500)
        #expect(cache.object(forKey: "busy") === busy)
        #expect(cache.object(forKey: "p100") != nil)
        #expect(cache.count == 2)
    }

    /// The walk of the default order promotes entries read since they came to the main queue;
    /// when all of those are in use, the free entries still in the small queue (under its share)
    /// are released too.
    @Test func theDefaultOrderReleasesFreeEntriesBehindAMainQueueInUse() {
        let cache = DiscardableCache<Int, PurgeableData>(coordinator: nil)
        var inUse: [PurgeableData] = []
        for key in 0..<60 {
            let data = PurgeableData(bytes: [1])  // created in use
            inUse.append(data)
            cache.setObject(data, forKey: key, cost: 100)
            _ = cache.object(forKey: key)  // read: the walk promotes it
        }
        for key in 60..<100 { cache.setObject(CacheFixtures.idleData(count: 1), forKey: key, cost: 100) }
        // Releasing 4,500 of 10,000 lowers the limit to 5,500: the small queue's share is 275,
        // so the walk leaves two free entries there and turns to the main queue, all in use.
        #expect(cache.release(Self.caches(4_500)) == 4_000, "every free entry, and none in use")
        #expect(cache.count == 60)
        #expect(inUse.allSatisfy { !$0.isContentDiscarded() })
    }

    @Test func discardableValuesAreAskedToDiscardOnlyWhenTheirTurnComes() {
        let cache = DiscardableCache<String, AnyObject>(coordinator: nil)
        cache.releaseOrder = .balanced  // the large entry first, and it meets the target
        let small = CacheFixtures.TrackedContent()
        let large = CacheFixtures.TrackedContent()
        cache.setObject(small, forKey: "small", cost: 10)
        cache.setObject(large, forKey: "large", cost: 100)
        #expect(cache.release(Self.caches(50)) == 100)
        #expect(large.discardRequests == 1 && large.isContentDiscarded())
        #expect(small.discardRequests == 0 && !small.isContentDiscarded())
        #expect(cache.object(forKey: "small") === small)
    }

    // MARK: Tier .discarded

    @Test func theDiscardedTierRemovesOnlyDiscardedContentAndReportsItFirst() {
        let cache = DiscardableCache<String, AnyObject>(coordinator: nil)
        let log = EvictionLog()
        cache.delegate = log
        let gone = CacheFixtures.discardedData()
        let idle = CacheFixtures.idleData()
        let busy = PurgeableData(bytes: [1])
        cache.setObject(gone, forKey: "gone", cost: 100)
        cache.setObject(idle, forKey: "idle", cost: 200)
        cache.setObject(busy, forKey: "busy", cost: 400)
        cache.setObject(CacheFixtures.Payload(key: 0), forKey: "plain", cost: 800)
        #expect(cache.discardedBytes == 100)
        #expect(cache.release(Self.discardedOnly) == 100)
        #expect(cache.discardedBytes == 0)
        #expect(cache.count == 3)
        #expect(cache.totalCost == 1_400)
        #expect(!idle.isContentDiscarded())  // the discarded tier does not discard
        #expect(log.objects.count == 1 && log.values(PurgeableData.self).first === gone)
        #expect(cache.release(Self.discardedOnly) == 0)
    }

    @Test func theDiscardedTierIgnoresItsTarget() {
        let cache = DiscardableCache<Int, PurgeableData>(coordinator: nil)
        for key in 0..<4 { cache.setObject(CacheFixtures.discardedData(), forKey: key, cost: 10) }
        #expect(cache.release(ReleaseRequest(level: .warning, tier: .discarded, targetBytes: 0)) == 40)
        #expect(cache.count == 0)
    }

    @Test func theDiscardedTierRemovesDiscardedContentEvenWhenReadsWouldReturnIt() {
        let cache = DiscardableCache<Int, PurgeableData>(coordinator: nil)
        cache.evictsObjectsWithDiscardedContent = false
        cache.setObject(CacheFixtures.discardedData(), forKey: 1, cost: 10)
        #expect(cache.discardedBytes == 10)
        #expect(cache.release(Self.discardedOnly) == 10)
        #expect(cache.count == 0)
    }

    @Test func discardedBytesFollowsContentAsItIsDiscarded() {
        let cache = DiscardableCache<Int, PurgeableData>(coordinator: nil)
        let first = CacheFixtures.idleData()
        let second = CacheFixtures.idleData()
        cache.setObject(first, forKey: 1, cost: 30)
        cache.setObject(second, forKey: 2, cost: 70)
        #expect(cache.discardedBytes == 0)
        first.discardContentIfPossible()
        #expect(cache.discardedBytes == 30)
        second.discardContentIfPossible()
        #expect(cache.discardedBytes == 100)
        cache.removeObject(forKey: 1)
        #expect(cache.discardedBytes == 70)
    }

    @Test func aCacheWithoutDiscardableContentHasNoDiscardedBytes() {
        let cache = Self.cache(costs: [1, 2, 3])
        #expect(cache.discardedBytes == 0)
        #expect(cache.release(Self.discardedOnly) == 0)
        #expect(cache.count == 3)
    }

    // MARK: Footprint

    @Test func theFootprintIsTheTotalCost() {
        let cache = DiscardableCache<Int, AnyObject>(coordinator: nil)
        cache.releaseOrder = .balanced  // the larger entry alone meets the target
        #expect(cache.footprintBytes == 0)
        cache.setObject(CacheFixtures.Payload(key: 1), forKey: 1, cost: 123)
        cache.setObject(CacheFixtures.idleData(), forKey: 2, cost: 456)
        #expect(cache.footprintBytes == cache.totalCost)
        #expect(cache.footprintBytes == 579)
        _ = cache.release(Self.caches(400))
        #expect(cache.footprintBytes == cache.totalCost)
        #expect(cache.footprintBytes == 123)
        cache.setObject(CacheFixtures.Payload(key: 1), forKey: 1, cost: 5)
        #expect(cache.footprintBytes == 5)
    }

    @Test func theNameIsTheConsumerNameInReports() {
        let coordinator = ReleaseCoordinator(trimsHeap: false)
        let cache = DiscardableCache<Int, Int>(coordinator: coordinator)
        cache.name = "thumbnails"
        cache.setObject(1, forKey: 1, cost: 64)
        let report = coordinator.release(level: .warning, targetBytes: 1)
        #expect(report.entries.map(\.consumer) == ["thumbnails"])
        #expect(report.entries.first?.bytesBefore == 64)
        #expect(report.entries.first?.bytesAfter == 0)
    }
}

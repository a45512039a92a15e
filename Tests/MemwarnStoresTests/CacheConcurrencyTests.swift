import MemwarnTestFixtures
import MemwarnTestKit
import Synchronization
import Testing

@testable import MemwarnRelease
@testable import MemwarnStores

/// Many tasks hammer one cache while another keeps releasing and clearing it; afterwards the
/// books must balance. Costs are derived from keys, so the expected total can be recomputed.
/// Run under the thread sanitizer as well (`--sanitize=thread`).
@Suite("CacheConcurrency")
struct CacheConcurrencyTests {
    typealias Payload = CacheFixtures.Payload
    typealias Flag = CacheFixtures.Flag

    static let keySpace = 1_024
    static let workers = 16
    static let operationsPerWorker = 20_000

    /// A deterministic cost for a key, 1...997.
    static func cost(_ key: Int) -> Int { (key &* 2_654_435_761) % 997 + 1 }

    static func bytes(for key: Int) -> [UInt8] { [UInt8](repeating: UInt8(truncatingIfNeeded: key), count: 32) }

    /// Counts evictions, checks their type, and calls back into the cache: it reads it on
    /// every eviction and puts every eighth evicted payload back.
    final class ReentrantDelegate: DiscardableCacheDelegate, Sendable {
        let target: DiscardableCache<Int, Payload>
        private let evictions = Atomic(0)
        private let wrongTypes = Atomic(0)
        var evicted: Int { evictions.load(ordering: .relaxed) }
        var wrongType: Int { wrongTypes.load(ordering: .relaxed) }

        init(target: DiscardableCache<Int, Payload>) { self.target = target }

        func cache(_ cache: AnyObject, willEvictObject object: Any) {
            let number = evictions.add(1, ordering: .relaxed).newValue
            guard let payload = object as? Payload else {
                wrongTypes.add(1, ordering: .relaxed)
                return
            }
            _ = target.count
            if number % 8 == 0 {
                target.setObject(payload, forKey: payload.key, cost: CacheConcurrencyTests.cost(payload.key))
            }
        }
    }

    /// Releases (both tiers, random targets), clears now and then and moves the limits and the
    /// trim's ceiling until `done` is set; returns the rounds run.
    static func releaseRepeatedly<Value>(_ cache: DiscardableCache<Int, Value>, until done: Flag, seed: UInt64) async -> Int {
        var random = SeededGenerator(seed: seed)
        var rounds = 0
        repeat {
            rounds += 1
            switch random.next() % 40 {
            case 0:
                cache.removeAllObjects()
            case 1:
                cache.countLimit = random.next() % 2 == 0 ? 0 : 600
            case 2:
                cache.totalCostLimit = random.next() % 2 == 0 ? 0 : 300_000
            case 3:
                cache.trimCeilingBytes = random.next() % 2 == 0 ? nil : 200_000 + Int(random.next() % 100_000)
                _ = cache.refillCount
            case 4..<10:
                _ = cache.release(ReleaseRequest(level: .critical, tier: .discarded, targetBytes: .max))
            case 10..<12:
                _ = cache.release(ReleaseRequest(level: .critical, tier: .caches, targetBytes: .max))
            default:
                _ = cache.release(ReleaseRequest(level: .warning, tier: .caches, targetBytes: Int(random.next() % 40_000)))
            }
            _ = (cache.count, cache.totalCost, cache.footprintBytes, cache.discardedBytes, cache.name)
            // Yield now and then only: the workers share the cooperative pool, and a release
            // task that yields every round runs a few dozen times in the whole test.
            if rounds % 16 == 0 { await Task.yield() }
        } while !done.isSet
        return rounds
    }

    /// Checks the books over the whole key space: every present value belongs to its key,
    /// `count` is the number of keys present and `totalCost` the sum of their costs. Returns
    /// the present keys in ascending order.
    static func checkBooks<Value>(
        _ cache: DiscardableCache<Int, Value>, belongs: (Value, Int) -> Bool,
        sourceLocation: SourceLocation = #_sourceLocation
    ) -> [Int] {
        cache.countLimit = 0
        cache.totalCostLimit = 0
        cache.trimCeilingBytes = nil  // the release task may have left one
        var present: [Int] = []
        var foreign: [Int] = []
        for key in 0..<keySpace {
            guard let value = cache.object(forKey: key) else { continue }
            present.append(key)
            if !belongs(value, key) { foreign.append(key) }
        }
        #expect(foreign.isEmpty, "values stored under the wrong key: \(foreign.prefix(10))", sourceLocation: sourceLocation)
        #expect(cache.count == present.count, sourceLocation: sourceLocation)
        #expect(cache.totalCost == present.reduce(0) { $0 + cost($1) }, sourceLocation: sourceLocation)
        #expect(cache.footprintBytes == cache.totalCost, sourceLocation: sourceLocation)
        return present
    }

    /// After a run: the queues must still be whole — linked both ways, counted right, every
    /// entry indexed — shrinking keeps ten of the keys present, clearing empties, and refilling
    /// holds every key once.
    static func checkStructure(_ cache: DiscardableCache<Int, Payload>, present: [Int]) {
        #expect(cache.lock.withLock { cache.storage.invariantViolations() } == [])
        cache.countLimit = 10
        let survivors = (0..<keySpace).filter { cache.object(forKey: $0) != nil }
        #expect(survivors.count == min(10, present.count))
        #expect(Set(survivors).isSubset(of: present))
        #expect(cache.lock.withLock { cache.storage.invariantViolations() } == [])
        #expect(cache.count == survivors.count)
        #expect(cache.totalCost == survivors.reduce(0) { $0 + cost($1) })
        cache.removeAllObjects()
        #expect(cache.count == 0 && cache.totalCost == 0)
        cache.countLimit = 0
        for key in 0..<keySpace { cache.setObject(Payload(key: key), forKey: key, cost: cost(key)) }
        #expect(cache.count == keySpace)
        #expect(cache.totalCost == (0..<keySpace).reduce(0) { $0 + cost($1) })
        let total = cache.totalCost
        #expect(cache.release(ReleaseRequest(level: .warning, tier: .caches, targetBytes: .max)) == total)
        #expect(cache.count == 0 && cache.totalCost == 0)
    }

    @Test func setGetAndRemoveFromManyTasksDuringReleasesKeepCountAndTotalCostConsistent() async {
        let cache = DiscardableCache<Int, Payload>(coordinator: nil)
        let delegate = ReentrantDelegate(target: cache)
        cache.delegate = delegate
        let done = Flag()
        async let releaseRounds = Self.releaseRepeatedly(cache, until: done, seed: 0xC0FFEE)
        let misplaced = await withTaskGroup(of: Int.self) { group in
            for worker in 0..<Self.workers {
                group.addTask {
                    var random = SeededGenerator(seed: UInt64(worker + 1) &* 0x9E37_79B9)
                    var misplaced = 0
                    for operation in 0..<Self.operationsPerWorker {
                        let key = Int(random.next() % UInt64(Self.keySpace))
                        switch random.next() % 10 {
                        case 0..<4:
                            cache.setObject(Payload(key: key), forKey: key, cost: Self.cost(key))
                        case 4..<8:
                            if let payload = cache.object(forKey: key), payload.key != key { misplaced += 1 }
                        default:
                            cache.removeObject(forKey: key)
                        }
                        if operation % 256 == 0 { await Task.yield() }
                    }
                    return misplaced
                }
            }
            return await group.reduce(0, +)
        }
        done.set()
        let rounds = await releaseRounds
        #expect(misplaced == 0)
        #expect(rounds > 0)
        #expect(delegate.wrongType == 0)
        let present = Self.checkBooks(cache) { $0.key == $1 }
        cache.delegate = nil  // it would put evicted payloads back
        Self.checkStructure(cache, present: present)
    }

    @Test func purgeableValuesUsedDiscardedAndReleasedFromManyTasksKeepTheBooksConsistent() async {
        let cache = DiscardableCache<Int, PurgeableData>(coordinator: nil)
        let delegate = CacheFixtures.CountingDelegate<PurgeableData>()
        cache.delegate = delegate
        let done = Flag()
        async let releaseRounds = Self.releaseRepeatedly(cache, until: done, seed: 0xBEEF)
        let corrupt = await withTaskGroup(of: Int.self) { group in
            for worker in 0..<Self.workers {
                group.addTask {
                    var random = SeededGenerator(seed: UInt64(worker + 101) &* 0x2545_F491)
                    var corrupt = 0
                    for operation in 0..<Self.operationsPerWorker {
                        let key = Int(random.next() % UInt64(Self.keySpace))
                        switch random.next() % 20 {
                        case 0..<7:
                            let data = PurgeableData(bytes: Self.bytes(for: key))
                            data.endContentAccess()
                            cache.setObject(data, forKey: key, cost: Self.cost(key))
                        case 7..<16:
                            if let data = cache.object(forKey: key), data.beginContentAccess() {
                                if data.bytes != Self.bytes(for: key) { corrupt += 1 }
                                data.endContentAccess()
                            }
                        case 16..<18:
                            cache.object(forKey: key)?.discardContentIfPossible()
                        default:
                            cache.removeObject(forKey: key)
                        }
                        if operation % 256 == 0 { await Task.yield() }
                    }
                    return corrupt
                }
            }
            return await group.reduce(0, +)
        }
        done.set()
        let rounds = await releaseRounds
        #expect(corrupt == 0)
        #expect(rounds > 0)
        #expect(delegate.wrongType == 0)
        // Reads over the key space evict whatever was discarded, so afterwards nothing is.
        _ = Self.checkBooks(cache) { data, key in data.bytes == Self.bytes(for: key) }
        #expect(cache.discardedBytes == 0)
        // Every access has ended, so everything can go.
        let total = cache.totalCost
        #expect(cache.release(ReleaseRequest(level: .warning, tier: .caches, targetBytes: .max)) == total)
        #expect(cache.count == 0 && cache.totalCost == 0)
    }

    @Test func aCoordinatorReleasesCachesThatOtherTasksUseCreateAndDrop() async {
        let coordinator = ReleaseCoordinator(trimsHeap: false)
        let caches = (0..<4).map { index in
            let cache = DiscardableCache<Int, Payload>(coordinator: coordinator)
            cache.name = "cache-\(index)"
            return cache
        }
        let done = Flag()
        let reports = CacheFixtures.Collected<Int>()
        coordinator.addReportObserver { report in reports.append(report.entries.count) }
        async let releases: Int = {
            var random = SeededGenerator(seed: 7)
            var rounds = 0
            repeat {
                rounds += 1
                let level: MemoryPressureLevel = random.next() % 4 == 0 ? .critical : .warning
                coordinator.release(level: level, targetBytes: Int(random.next() % 100_000))
                if rounds % 16 == 0 { await Task.yield() }
            } while !done.isSet
            return rounds
        }()
        await withTaskGroup(of: Void.self) { group in
            for worker in 0..<8 {
                group.addTask {
                    var random = SeededGenerator(seed: UInt64(worker + 1_000))
                    for operation in 0..<5_000 {
                        let cache = caches[Int(random.next() % UInt64(caches.count))]
                        let key = Int(random.next() % UInt64(Self.keySpace))
                        switch random.next() % 4 {
                        case 0, 1: cache.setObject(Payload(key: key), forKey: key, cost: Self.cost(key))
                        case 2: _ = cache.object(forKey: key)
                        default: cache.removeObject(forKey: key)
                        }
                        if operation % 100 == 0 {
                            // A short-lived cache and consumer join and leave while releases run.
                            let transient = DiscardableCache<Int, Payload>(coordinator: coordinator)
                            transient.setObject(Payload(key: key), forKey: key, cost: 10)
                            let consumer = CacheFixtures.FakeConsumer("transient", tier: .media, footprint: 100, discarded: 10)
                            coordinator.register(consumer)
                            _ = coordinator.consumers.count
                            coordinator.unregister(consumer)
                            await Task.yield()
                        }
                    }
                }
            }
        }
        done.set()
        let rounds = await releases
        #expect(rounds > 0)
        #expect(reports.values.count == rounds)
        for cache in caches {
            _ = Self.checkBooks(cache) { $0.key == $1 }
        }
        #expect(Set(coordinator.consumers.map(\.name)) == Set(caches.map(\.name)))
    }
}

import MemwarnSystem
import MemwarnTestFixtures
import Synchronization
import Testing

@testable import MemwarnRelease
@testable import MemwarnStores

/// The seam between the cache and the allocators behind its values: content that discards into
/// a batch, and the memory returners a release ends with.
@Suite struct DiscardBatchTests {
    /// What a lane saw: its adds and its finishes.
    final class Ledger: Sendable {
        let adds = Atomic<Int>(0)
        let finishes = Atomic<Int>(0)
        let addsAtFinish = Locked<[Int]>([])
    }

    /// A batch's lane for ``Content``: it counts the discards and is finished once.
    final class CountingLane: DiscardBatchLane {
        let ledger: Ledger
        init(_ ledger: Ledger) { self.ledger = ledger }
        func add() { ledger.adds.add(1, ordering: .relaxed) }
        func finish() {
            let adds = ledger.adds.load(ordering: .relaxed)
            ledger.addsAtFinish.withLock { $0.append(adds) }
            ledger.finishes.add(1, ordering: .relaxed)
        }
    }

    /// Content whose discards go to a ``CountingLane``: the fixtures' tracked content, which can
    /// also discard into a batch. Made in use when asked (one access begun).
    final class Content: BatchDiscardableContent {
        let ledger: Ledger
        private let tracked = CacheFixtures.TrackedContent()
        init(_ ledger: Ledger, inUse: Bool = false) {
            self.ledger = ledger
            if inUse { _ = tracked.beginContentAccess() }
        }
        func beginContentAccess() -> Bool { tracked.beginContentAccess() }
        func endContentAccess() { tracked.endContentAccess() }
        func discardContentIfPossible() { tracked.discardContentIfPossible() }
        func isContentDiscarded() -> Bool { tracked.isContentDiscarded() }
        func discardContentIfPossible(into batch: inout DiscardBatch) -> Bool {
            tracked.discardContentIfPossible()
            guard tracked.isContentDiscarded() else { return false }
            batch.lane { CountingLane(ledger) }.add()
            return true
        }
    }

    @Test func aReleaseOfEverythingDiscardsIntoOneLaneFinishedOnceAfterTheLastDiscard() {
        let ledger = Ledger()
        let cache = DiscardableCache<Int, Content>(coordinator: nil)
        for key in 0..<100 { cache.setObject(Content(ledger, inUse: key % 10 == 0), forKey: key, cost: 10) }
        let freed = cache.release(ReleaseRequest(level: .critical, tier: .caches, targetBytes: .max))
        #expect(freed == 900, "the ten in use stay")
        #expect(ledger.adds.load(ordering: .relaxed) == 90)
        #expect(ledger.finishes.load(ordering: .relaxed) == 1, "one lane, finished once")
        #expect(ledger.addsAtFinish.withLock { $0 } == [90], "finished after the last discard")
        #expect(cache.count == 10)
    }

    @Test func contentThatCannotBatchIsStillDiscardedOneByOne() {
        final class Plain: DiscardableContent {
            let discarded = Atomic<Bool>(false)
            func beginContentAccess() -> Bool { !discarded.load(ordering: .relaxed) }
            func endContentAccess() {}
            func discardContentIfPossible() { discarded.store(true, ordering: .relaxed) }
            func isContentDiscarded() -> Bool { discarded.load(ordering: .relaxed) }
        }
        let cache = DiscardableCache<Int, Plain>(coordinator: nil)
        let values = (0..<20).map { _ in Plain() }
        for (key, value) in values.enumerated() { cache.setObject(value, forKey: key, cost: 1) }
        #expect(cache.release(ReleaseRequest(level: .critical, tier: .caches, targetBytes: .max)) == 20)
        #expect(values.allSatisfy { $0.isContentDiscarded() })
    }

    @Test func everyReleaseThatTrimsEndsWithTheRegisteredMemoryReturners() {
        let calls = Atomic<Int>(0)
        ReleaseCoordinator.addMemoryReturner { calls.add(1, ordering: .relaxed) }
        ReleaseCoordinator.returnFreedMemory()
        #expect(calls.load(ordering: .relaxed) >= 1)
        let before = calls.load(ordering: .relaxed)
        let coordinator = ReleaseCoordinator(trimsHeap: true)
        let cache = DiscardableCache<Int, [UInt8]>(coordinator: coordinator)
        cache.setObject([1, 2, 3], forKey: 1, cost: 1 << 20)
        let report = coordinator.release(level: .critical, targetBytes: .max)
        #expect(report.trimmedHeap && report.freedBytes == 1 << 20)
        #expect(calls.load(ordering: .relaxed) > before, "the release gave its returners their turn")
    }
}

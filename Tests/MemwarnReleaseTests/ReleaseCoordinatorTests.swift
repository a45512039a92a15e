import CgroupKit
import Foundation
import MemwarnTestFixtures
import Testing

@testable import MemwarnMonitor
@testable import MemwarnRelease
@testable import MemwarnStores

/// The coordinator's documented release order: tier by tier (discarded, caches, media, then
/// at `.critical` shared resources and suspended units), the largest consumer first, until
/// the target is met.
@Suite("ReleaseCoordinator")
struct ReleaseCoordinatorTests {
    typealias FakeConsumer = CacheFixtures.FakeConsumer

    struct Step: Equatable, CustomStringConvertible {
        var consumer: String
        var tier: ReleaseTier
        var description: String { "\(consumer)@\(tier)" }
    }

    static func steps(_ report: ReleaseReport) -> [Step] {
        report.entries.map { Step(consumer: $0.consumer, tier: $0.tier) }
    }

    /// One consumer per tier and size; `withDiscarded` holds 30 of its 100 bytes discarded.
    struct Registry {
        let coordinator = ReleaseCoordinator(trimsHeap: false)
        let withDiscarded = FakeConsumer("cache-with-discarded", tier: .caches, footprint: 100, discarded: 30)
        let smallCache = FakeConsumer("small-cache", tier: .caches, footprint: 50)
        let largeCache = FakeConsumer("large-cache", tier: .caches, footprint: 200)
        let media = FakeConsumer("media", tier: .media, footprint: 300)
        let smallMedia = FakeConsumer("small-media", tier: .media, footprint: 20)
        let shared = FakeConsumer("shared", tier: .sharedResources, footprint: 400)
        let suspended = FakeConsumer("suspended", tier: .suspendedUnits, footprint: 500)
        let empty = FakeConsumer("empty-cache", tier: .caches, footprint: 0)

        var all: [FakeConsumer] { [withDiscarded, smallCache, largeCache, media, smallMedia, shared, suspended, empty] }

        init() {
            for consumer in all { coordinator.register(consumer) }
        }
    }

    // MARK: Order

    @Test func aWarningWalksDiscardedThenCachesLargestFirstThenMediaAndNeverSharedResources() {
        let registry = Registry()
        let report = registry.coordinator.release(level: .warning, targetBytes: .max)
        #expect(
            Self.steps(report) == [
                Step(consumer: "cache-with-discarded", tier: .discarded),
                Step(consumer: "large-cache", tier: .caches),
                Step(consumer: "cache-with-discarded", tier: .caches),  // 70 left after its discarded 30
                Step(consumer: "small-cache", tier: .caches),
                Step(consumer: "media", tier: .media),
                Step(consumer: "small-media", tier: .media),
            ])
        #expect(registry.shared.requests.isEmpty)
        #expect(registry.suspended.requests.isEmpty)
        #expect(registry.shared.footprintBytes == 400)
        #expect(report.freedBytes == 670)
        #expect(!report.metTarget)
        #expect(report.level == .warning)
    }

    @Test func aCriticalReleaseAlsoAsksSharedResourcesThenSuspendedUnits() {
        let registry = Registry()
        let report = registry.coordinator.release(level: .critical, targetBytes: .max)
        #expect(Self.steps(report).map(\.tier) == [.discarded, .caches, .caches, .caches, .media, .media, .sharedResources, .suspendedUnits])
        #expect(Self.steps(report).suffix(2) == [Step(consumer: "shared", tier: .sharedResources), Step(consumer: "suspended", tier: .suspendedUnits)])
        #expect(registry.shared.requests.map(\.level) == [.critical])
        #expect(report.freedBytes == 1_570)
    }

    @Test func aConsumerWithNothingToGiveIsNotAsked() {
        let registry = Registry()
        _ = registry.coordinator.release(level: .critical, targetBytes: .max)
        #expect(registry.empty.requests.isEmpty)
        // Only the consumer with discarded content is asked in the discarded tier.
        #expect(registry.smallCache.requests.map(\.tier) == [.caches])
    }

    @Test func aNormalLevelReleasesNothing() {
        let registry = Registry()
        let report = registry.coordinator.release(level: .normal, targetBytes: .max)
        #expect(report.entries.isEmpty)
        #expect(registry.all.allSatisfy { $0.requests.isEmpty })
        #expect(!report.trimmedHeap)
    }

    // MARK: Target

    @Test func releaseStopsOnceTheTargetIsMet() {
        let registry = Registry()
        let report = registry.coordinator.release(level: .warning, targetBytes: 150)
        #expect(
            Self.steps(report) == [
                Step(consumer: "cache-with-discarded", tier: .discarded),
                Step(consumer: "large-cache", tier: .caches),
            ])
        #expect(report.freedBytes == 230)
        #expect(report.metTarget)
        #expect(registry.media.requests.isEmpty)
        #expect(registry.smallCache.requests.isEmpty)
    }

    @Test func discardedContentAloneCanMeetTheTarget() {
        let registry = Registry()
        let report = registry.coordinator.release(level: .critical, targetBytes: 30)
        #expect(Self.steps(report) == [Step(consumer: "cache-with-discarded", tier: .discarded)])
        #expect(report.metTarget)
    }

    @Test func aZeroTargetDropsOnlyDiscardedContent() {
        let registry = Registry()
        let report = registry.coordinator.release(level: .critical, targetBytes: 0)
        #expect(Self.steps(report) == [Step(consumer: "cache-with-discarded", tier: .discarded)])
        #expect(report.freedBytes == 30)
        #expect(registry.withDiscarded.footprintBytes == 70)
        #expect(registry.largeCache.requests.isEmpty)
    }

    @Test func aZeroTargetWithNothingDiscardedAsksNoOne() {
        let coordinator = ReleaseCoordinator(trimsHeap: false)
        let cache = FakeConsumer("c", tier: .caches, footprint: 100)
        coordinator.register(cache)
        let report = coordinator.release(level: .warning, targetBytes: 0)
        #expect(report.entries.isEmpty)
        #expect(report.metTarget)
        #expect(cache.requests.isEmpty)
    }

    @Test func eachConsumerIsAskedForWhatIsStillWanted() {
        let coordinator = ReleaseCoordinator(trimsHeap: false)
        let stingy = FakeConsumer("stingy", tier: .caches, footprint: 200, discarded: 10, releasesAtMost: 100)
        let next = FakeConsumer("next", tier: .caches, footprint: 150)
        let media = FakeConsumer("media", tier: .media, footprint: 500)
        for consumer in [stingy, next, media] { coordinator.register(consumer) }
        let report = coordinator.release(level: .warning, targetBytes: 200)
        #expect(stingy.requests.map(\.tier) == [.discarded, .caches])
        #expect(stingy.requests.map(\.targetBytes) == [.max, 190])  // the discarded tier is asked for everything
        #expect(next.requests.map(\.targetBytes) == [90])
        #expect(media.requests.isEmpty)
        #expect(report.entries.map(\.bytesFreed) == [10, 100, 150])
        #expect(report.freedBytes == 260)
    }

    @Test func reportEntriesRecordTheFootprintBeforeAndAfter() {
        let coordinator = ReleaseCoordinator(trimsHeap: false)
        let consumer = FakeConsumer("c", tier: .caches, footprint: 100, discarded: 40)
        coordinator.register(consumer)
        let report = coordinator.release(level: .warning, targetBytes: 1_000)
        #expect(report.entries.map(\.bytesBefore) == [100, 60])
        #expect(report.entries.map(\.bytesAfter) == [60, 0])
        #expect(report.entries.map(\.bytesFreed) == [40, 60])
        #expect(report.targetBytes == 1_000)
    }

    @Test func reportObserversSeeEveryReport() {
        let coordinator = ReleaseCoordinator(trimsHeap: false)
        let consumer = FakeConsumer("c", tier: .caches, footprint: 100)
        coordinator.register(consumer)
        let seen = CacheFixtures.Collected<Int>()
        coordinator.addReportObserver { report in seen.append(report.freedBytes) }
        let first = coordinator.release(level: .warning, targetBytes: 10)
        let second = coordinator.release(level: .warning, targetBytes: 10)
        #expect(seen.values == [first.freedBytes, second.freedBytes])
        #expect(seen.values == [100, 0])
        #expect(consumer.requests.count == 1)
    }

    @Test func theHeapIsTrimmedOnlyWhenSomethingWasFreedAndTrimmingIsOn() {
        let trimming = ReleaseCoordinator()
        #expect(trimming.trimsHeap)
        let consumer = FakeConsumer("c", tier: .caches, footprint: 10)
        trimming.register(consumer)
        #expect(trimming.release(level: .warning, targetBytes: 1).trimmedHeap)
        #expect(!trimming.release(level: .warning, targetBytes: 1).trimmedHeap)
        let notTrimming = ReleaseCoordinator(trimsHeap: false)
        let other = FakeConsumer("d", tier: .caches, footprint: 10)
        notTrimming.register(other)
        #expect(!notTrimming.release(level: .warning, targetBytes: 1).trimmedHeap)
        #expect(consumer.requests.count == 1 && other.requests.count == 1)
    }

    // MARK: Registry

    @Test func aDeallocatedConsumerLeavesTheRegistry() {
        let coordinator = ReleaseCoordinator(trimsHeap: false)
        let kept = FakeConsumer("kept", tier: .caches, footprint: 10)
        coordinator.register(kept)
        weak var weakGone: FakeConsumer?
        do {
            let gone = FakeConsumer("gone", tier: .caches, footprint: 10)
            weakGone = gone
            coordinator.register(gone)
            #expect(coordinator.consumers.count == 2)
        }
        #expect(weakGone == nil)
        #expect(coordinator.consumers.map(\.name) == ["kept"])
        #expect(Self.steps(coordinator.release(level: .warning, targetBytes: .max)) == [Step(consumer: "kept", tier: .caches)])
    }

    @Test func registeringTwiceIsHarmlessAndUnregisterRemoves() {
        let coordinator = ReleaseCoordinator(trimsHeap: false)
        let consumer = FakeConsumer("c", tier: .caches, footprint: 10)
        coordinator.register(consumer)
        coordinator.register(consumer)
        #expect(coordinator.consumers.count == 1)
        #expect(coordinator.release(level: .warning, targetBytes: .max).entries.count == 1)
        coordinator.unregister(consumer)
        #expect(coordinator.consumers.isEmpty)
        coordinator.unregister(consumer)
        #expect(coordinator.consumers.isEmpty)
    }

    @Test func theCoordinatorDrivesRealCachesInOrder() {
        let coordinator = ReleaseCoordinator(trimsHeap: false)
        let small = DiscardableCache<Int, AnyObject>(coordinator: coordinator)
        small.name = "small"
        let large = DiscardableCache<Int, AnyObject>(coordinator: coordinator)
        large.name = "large"
        small.setObject(CacheFixtures.discardedData(), forKey: 0, cost: 5)
        small.setObject(CacheFixtures.Payload(key: 1), forKey: 1, cost: 10)
        large.setObject(CacheFixtures.Payload(key: 2), forKey: 2, cost: 100)
        large.setObject(CacheFixtures.Payload(key: 3), forKey: 3, cost: 60)
        let report = coordinator.release(level: .warning, targetBytes: 120)
        #expect(Self.steps(report) == [Step(consumer: "small", tier: .discarded), Step(consumer: "large", tier: .caches)])
        #expect(report.entries.map(\.bytesFreed) == [5, 160])
        #expect(small.count == 1 && small.totalCost == 10)
        #expect(large.count == 0)
    }

    // MARK: Target arithmetic

    static func snapshot(usage: UInt64, limit: UInt64?, systemTotal: UInt64? = nil) -> PressureSnapshot {
        PressureSnapshot(
            time: .zero, cgroup: nil, usageBytes: usage,
            limit: limit.map { EffectiveLimit(bytes: $0, file: "memory.max", cgroupPath: "/test") },
            system: systemTotal.map { SystemMemory(totalBytes: $0, availableBytes: 0) },
            pressure: nil, pressureFile: nil)
    }

    static func policy(recovery: Double) -> PressurePolicy {
        var policy = PressurePolicy()
        policy.recoveryRatio = recovery
        return policy
    }

    @Test func theTargetIsUsageAboveTheRecoveryMark() {
        #expect(ReleaseCoordinator.target(for: Self.snapshot(usage: 900, limit: 1_000), policy: Self.policy(recovery: 0.5)) == 400)
        #expect(ReleaseCoordinator.target(for: Self.snapshot(usage: 1_000, limit: 1_000), policy: Self.policy(recovery: 0.75)) == 250)
        #expect(ReleaseCoordinator.target(for: Self.snapshot(usage: 1_200, limit: 1_000), policy: Self.policy(recovery: 0.5)) == 700)
    }

    @Test func theTargetIsZeroBelowTheRecoveryMark() {
        #expect(ReleaseCoordinator.target(for: Self.snapshot(usage: 400, limit: 1_000), policy: Self.policy(recovery: 0.5)) == 0)
        #expect(ReleaseCoordinator.target(for: Self.snapshot(usage: 500, limit: 1_000), policy: Self.policy(recovery: 0.5)) == 0)
        #expect(ReleaseCoordinator.target(for: Self.snapshot(usage: 0, limit: 1_000), policy: Self.policy(recovery: 0.5)) == 0)
    }

    @Test func aFractionalTargetRoundsUp() {
        #expect(ReleaseCoordinator.target(for: Self.snapshot(usage: 2, limit: 3), policy: Self.policy(recovery: 0.5)) == 1)
    }

    @Test func theTargetUsesTheSystemTotalWhenNoLimitApplies() {
        #expect(ReleaseCoordinator.target(for: Self.snapshot(usage: 800, limit: nil, systemTotal: 1_000), policy: Self.policy(recovery: 0.5)) == 300)
        // A cgroup limit wins over the system's total.
        #expect(ReleaseCoordinator.target(for: Self.snapshot(usage: 800, limit: 1_000, systemTotal: 10_000), policy: Self.policy(recovery: 0.5)) == 300)
    }

    @Test func theTargetIsZeroWhenTheCapacityIsUnknown() {
        #expect(ReleaseCoordinator.target(for: Self.snapshot(usage: 1 << 40, limit: nil), policy: PressurePolicy()) == 0)
    }

    @Test func theDefaultPolicyAimsAtSeventyPercent() {
        let gib: UInt64 = 1 << 30
        let target = ReleaseCoordinator.target(for: Self.snapshot(usage: gib, limit: gib), policy: PressurePolicy())
        // 30 % of 1 GiB, give or take the rounding of 0.7 in binary.
        #expect(abs(target - Int(Double(gib) * 0.3)) <= 1)
    }
}

/// A cache of `PurgeableData` whose content was never ended gave nothing back
/// and the report showed only "110 -> 110": the entry now says what is in use.
struct ReleaseInUseTests {
    @Test func contentNeverEndedIsReportedInUseAndEndedContentIsReleased() {
        let coordinator = ReleaseCoordinator(trimsHeap: false)
        let pinned = DiscardableCache<Int, PurgeableData>(coordinator: coordinator)
        pinned.name = "pinned"
        let ended = DiscardableCache<Int, PurgeableData>(coordinator: coordinator)
        ended.name = "ended"
        for key in 0..<8 {
            pinned.setObject(PurgeableData(repeating: 1, count: 64 << 10), forKey: key, cost: 64 << 10)  // starts accessed, never ended
            let data = PurgeableData(repeating: 2, count: 32 << 10)
            data.endContentAccess()
            ended.setObject(data, forKey: key, cost: 32 << 10)
        }
        let report = coordinator.release(level: .critical, targetBytes: .max)
        #expect(report.entriesInUse.map(\.consumer) == ["pinned"], "\(report.entries)")
        #expect(report.entriesInUse.first?.bytesInUse == 8 * (64 << 10))
        #expect(report.entries.first { $0.consumer == "ended" }.map { $0.bytesFreed == 8 * (32 << 10) && $0.bytesInUse == 0 } == true)
    }
}

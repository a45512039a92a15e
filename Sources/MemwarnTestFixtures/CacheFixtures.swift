package import MemwarnRelease
package import MemwarnStores
import MemwarnSystem
import MemwarnTestKit
import Synchronization

/// Helpers shared by the cache, release, monitor and control suites, namespaced so they cannot
/// clash with a suite's own helpers.
package enum CacheFixtures {
    /// A delegate that records every value the cache lets go, in order, and can run an
    /// action (such as calling back into the cache) on each one. For single-threaded tests.
    package final class EvictionLog: DiscardableCacheDelegate, @unchecked Sendable {
        package init() {}

        // @unchecked: used by single-threaded tests only (the cache calls it on the test's
        // thread: no release coordinator is involved).
        package private(set) var objects: [Any] = []
        package private(set) var caches: [ObjectIdentifier] = []
        package var onEvict: ((Any) -> Void)?

        package func cache(_ cache: AnyObject, willEvictObject object: Any) {
            objects.append(object)
            caches.append(ObjectIdentifier(cache))
            onEvict?(object)
        }

        package func values<T>(_: T.Type) -> [T] { objects.compactMap { $0 as? T } }
    }

    /// A delegate safe to share across threads: counts evictions and checks their type.
    package final class CountingDelegate<Expected>: DiscardableCacheDelegate, Sendable {
        package init() {}

        private let counts = Locked((evicted: 0, wrongType: 0))
        package var evicted: Int { counts.withLock { $0.evicted } }
        package var wrongType: Int { counts.withLock { $0.wrongType } }

        package func cache(_ cache: AnyObject, willEvictObject object: Any) {
            let isExpected = object is Expected
            counts.withLock {
                $0.evicted += 1
                if !isExpected { $0.wrongType += 1 }
            }
        }
    }

    /// A key compared by identity, as reference keys are in `NSCache`.
    package final class IdentityKey: Hashable, Sendable {
        package let label: String
        package init(_ label: String) { self.label = label }
        package static func == (lhs: IdentityKey, rhs: IdentityKey) -> Bool { lhs === rhs }
        package func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
    }

    /// A struct key compared by value.
    package struct CompositeKey: Hashable, Sendable {
        package var bucket: String
        package var number: Int

        package init(bucket: String, number: Int) {
            self.bucket = bucket
            self.number = number
        }
    }

    /// A reference value that is not discardable content.
    package final class Payload: Sendable {
        package let key: Int
        package init(key: Int) { self.key = key }
    }

    /// Discardable content that is not `PurgeableData`, with counters.
    package final class TrackedContent: DiscardableContent, Sendable {
        package init() {}

        private let state = Locked((accesses: 0, discarded: false, discardRequests: 0))
        package var discardRequests: Int { state.withLock { $0.discardRequests } }

        package func beginContentAccess() -> Bool {
            state.withLock { state in
                guard !state.discarded else { return false }
                state.accesses += 1
                return true
            }
        }
        package func endContentAccess() { state.withLock { $0.accesses -= 1 } }
        package func discardContentIfPossible() {
            state.withLock { state in
                state.discardRequests += 1
                if state.accesses == 0 { state.discarded = true }
            }
        }
        package func isContentDiscarded() -> Bool { state.withLock { $0.discarded } }
    }

    /// A purgeable value whose bytes are already discarded.
    package static func discardedData(count: Int = 8) -> PurgeableData {
        let data = PurgeableData(repeating: 1, count: count)
        data.endContentAccess()
        data.discardContentIfPossible()
        return data
    }

    /// A purgeable value that is not in use (it may be discarded).
    package static func idleData(count: Int = 8, byte: UInt8 = 1) -> PurgeableData {
        let data = PurgeableData(repeating: byte, count: count)
        data.endContentAccess()
        return data
    }

    /// A memory consumer that holds `footprint` bytes (of which `discarded` are free to drop)
    /// and records what it is asked.
    package final class FakeConsumer: MemoryConsumer, Sendable {
        private struct State {
            package var footprint: Int
            package var discarded: Int
            package var requests: [ReleaseRequest] = []
        }

        package let name: String
        package let tier: ReleaseTier
        /// The most it gives back per request (`nil`: everything asked for in its tier).
        package let releasesAtMost: Int?
        private let state: Locked<State>

        package init(_ name: String, tier: ReleaseTier, footprint: Int, discarded: Int = 0, releasesAtMost: Int? = nil) {
            self.name = name
            self.tier = tier
            self.releasesAtMost = releasesAtMost
            state = Locked(State(footprint: footprint, discarded: discarded))
        }

        package var footprintBytes: Int { state.withLock { $0.footprint } }
        package var discardedBytes: Int { state.withLock { $0.discarded } }
        package var requests: [ReleaseRequest] { state.withLock { $0.requests } }

        package func release(_ request: ReleaseRequest) -> Int {
            state.withLock { state in
                state.requests.append(request)
                let available = request.tier == .discarded ? state.discarded : state.footprint
                let freed = min(available, releasesAtMost ?? .max)
                state.footprint -= freed
                state.discarded = max(0, state.discarded - freed)
                return freed
            }
        }
    }

    /// Runs `body` on a detached task and reports whether it finished within `limit`; a
    /// deadlocked body is left blocked instead of hanging the test run.
    package static func finishes(within limit: Duration = .seconds(10), _ body: @escaping @Sendable () -> Void) async -> Bool {
        let finished = AsyncCondition<Bool>()
        Task.detached {
            body()
            finished.open()
        }
        return await finished.wait(within: limit)
    }

    /// Values gathered from several threads.
    package final class Collected<Element: Sendable>: Sendable {
        package init() {}

        private let storage = Locked<[Element]>([])
        package var values: [Element] { storage.withLock { $0 } }
        package func append(_ element: Element) { storage.withLock { $0.append(element) } }
    }

    /// A flag shared between tasks.
    package final class Flag: Sendable {
        package init() {}

        private let value = Atomic(false)
        package var isSet: Bool { value.load(ordering: .acquiring) }
        package func set() { value.store(true, ordering: .releasing) }
    }
}

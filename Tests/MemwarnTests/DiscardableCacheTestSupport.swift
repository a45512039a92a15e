import Memwarn
import MemwarnSystem
import MemwarnTestKit
import Synchronization
import Testing

@testable import MemwarnRelease
@testable import MemwarnStores

/// Helpers shared by the cache and release suites, namespaced so they cannot clash with
/// other suites' helpers in this target.
enum CacheFixtures {
    /// A delegate that records every value the cache lets go, in order, and can run an
    /// action (such as calling back into the cache) on each one. For single-threaded tests.
    final class EvictionLog: DiscardableCacheDelegate, @unchecked Sendable {
        // @unchecked: used by single-threaded tests only (the cache calls it on the test's
        // thread: no release coordinator is involved).
        private(set) var objects: [Any] = []
        private(set) var caches: [ObjectIdentifier] = []
        var onEvict: ((Any) -> Void)?

        func cache(_ cache: AnyObject, willEvictObject object: Any) {
            objects.append(object)
            caches.append(ObjectIdentifier(cache))
            onEvict?(object)
        }

        func values<T>(_: T.Type) -> [T] { objects.compactMap { $0 as? T } }
    }

    /// A delegate safe to share across threads: counts evictions and checks their type.
    final class CountingDelegate<Expected>: DiscardableCacheDelegate, Sendable {
        private let counts = Locked((evicted: 0, wrongType: 0))
        var evicted: Int { counts.withLock { $0.evicted } }
        var wrongType: Int { counts.withLock { $0.wrongType } }

        func cache(_ cache: AnyObject, willEvictObject object: Any) {
            let isExpected = object is Expected
            counts.withLock {
                $0.evicted += 1
                if !isExpected { $0.wrongType += 1 }
            }
        }
    }

    /// A key compared by identity, as reference keys are in `NSCache`.
    final class IdentityKey: Hashable, Sendable {
        let label: String
        init(_ label: String) { self.label = label }
        static func == (lhs: IdentityKey, rhs: IdentityKey) -> Bool { lhs === rhs }
        func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
    }

    /// A struct key compared by value.
    struct CompositeKey: Hashable, Sendable {
        var bucket: String
        var number: Int
    }

    /// A reference value that is not discardable content.
    final class Payload: Sendable {
        let key: Int
        init(key: Int) { self.key = key }
    }

    /// Discardable content that is not `PurgeableData`, with counters.
    final class TrackedContent: DiscardableContent, Sendable {
        private let state = Locked((accesses: 0, discarded: false, discardRequests: 0))
        var discardRequests: Int { state.withLock { $0.discardRequests } }

        func beginContentAccess() -> Bool {
            state.withLock { state in
                guard !state.discarded else { return false }
                state.accesses += 1
                return true
            }
        }
        func endContentAccess() { state.withLock { $0.accesses -= 1 } }
        func discardContentIfPossible() {
            state.withLock { state in
                state.discardRequests += 1
                if state.accesses == 0 { state.discarded = true }
            }
        }
        func isContentDiscarded() -> Bool { state.withLock { $0.discarded } }
    }

    /// A purgeable value whose bytes are already discarded.
    static func discardedData(count: Int = 8) -> PurgeableData {
        let data = PurgeableData(repeating: 1, count: count)
        data.endContentAccess()
        data.discardContentIfPossible()
        return data
    }

    /// A purgeable value that is not in use (it may be discarded).
    static func idleData(count: Int = 8, byte: UInt8 = 1) -> PurgeableData {
        let data = PurgeableData(repeating: byte, count: count)
        data.endContentAccess()
        return data
    }

    /// A memory consumer that holds `footprint` bytes (of which `discarded` are free to drop)
    /// and records what it is asked.
    final class FakeConsumer: MemoryConsumer, Sendable {
        private struct State {
            var footprint: Int
            var discarded: Int
            var requests: [ReleaseRequest] = []
        }

        let name: String
        let tier: ReleaseTier
        /// The most it gives back per request (`nil`: everything asked for in its tier).
        let releasesAtMost: Int?
        private let state: Locked<State>

        init(_ name: String, tier: ReleaseTier, footprint: Int, discarded: Int = 0, releasesAtMost: Int? = nil) {
            self.name = name
            self.tier = tier
            self.releasesAtMost = releasesAtMost
            state = Locked(State(footprint: footprint, discarded: discarded))
        }

        var footprintBytes: Int { state.withLock { $0.footprint } }
        var discardedBytes: Int { state.withLock { $0.discarded } }
        var requests: [ReleaseRequest] { state.withLock { $0.requests } }

        func release(_ request: ReleaseRequest) -> Int {
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
    static func finishes(within limit: Duration = .seconds(10), _ body: @escaping @Sendable () -> Void) async -> Bool {
        let finished = AsyncCondition<Bool>()
        Task.detached {
            body()
            finished.open()
        }
        return await finished.wait(within: limit)
    }

    /// Values gathered from several threads.
    final class Collected<Element: Sendable>: Sendable {
        private let storage = Locked<[Element]>([])
        var values: [Element] { storage.withLock { $0 } }
        func append(_ element: Element) { storage.withLock { $0.append(element) } }
    }

    /// A flag shared between tasks.
    final class Flag: Sendable {
        private let value = Atomic(false)
        var isSet: Bool { value.load(ordering: .acquiring) }
        func set() { value.store(true, ordering: .releasing) }
    }
}

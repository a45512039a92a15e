public import MemwarnRelease

/// What a ``DiscardableCache`` registers with its coordinator: the cache's memory, released
/// from the coordinator's thread.
///
/// The cache holds it; the coordinator holds it weakly, so it leaves the registry with the cache.
@usableFromInline
final class CacheConsumer<Key: Hashable & Sendable, Value>: MemoryConsumer, @unchecked Sendable {
    // @unchecked: it reaches the cache only through the cache's methods, which read and write
    // the entries under the cache's lock, and it hands no value to code on its thread but the
    // delegate's (`Sendable`) and the values' `DiscardableContent` (`Sendable`): the rest it
    // drops (see `DiscardableCache.init(coordinator:)`). `cache` is a weak reference written
    // once, at init.
    @usableFromInline weak var cache: DiscardableCache<Key, Value>?

    @inlinable
    init(_ cache: DiscardableCache<Key, Value>) { self.cache = cache }

    @usableFromInline var name: String { cache?.name ?? "" }
    @usableFromInline var tier: ReleaseTier { .caches }
    @usableFromInline var footprintBytes: Int { cache?.footprintBytes ?? 0 }
    @usableFromInline var discardedBytes: Int { cache?.discardedBytes ?? 0 }

    @inlinable
    func release(_ request: ReleaseRequest) -> Int { cache?.release(request) ?? 0 }
}

// The proactive trim reaches the cache the same way (see `DiscardableCache+Trim.swift`).
extension CacheConsumer: TrimmableConsumer {
    @usableFromInline var refillCount: Int { cache?.refillCount ?? 0 }

    @usableFromInline var trimCeilingBytes: Int? {
        get { cache?.trimCeilingBytes }
        set { cache?.trimCeilingBytes = newValue }
    }
}

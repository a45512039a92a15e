public import MemwarnRelease

// A cache of `Sendable` values is itself `Sendable`. Every cache answers its coordinator's
// releases through its ``CacheConsumer``; these members are what that consumer reports and calls.
extension DiscardableCache: @unchecked Sendable where Value: Sendable {
    // @unchecked: every stored property is read and written only while `lock` is held (`tier`,
    // `consumer` and the release closure are set in init and never change), and values are
    // `Sendable`.
}

extension DiscardableCache {
    /// The release tier: ``/MemwarnRelease/ReleaseTier/caches``.
    public var tier: ReleaseTier { .caches }

    /// The sum of the entries' costs (cost is bytes).
    public var footprintBytes: Int { totalCost }

    /// The cost of entries whose content was already discarded.
    ///
    /// - Complexity: O(n) when the cache holds discardable content, else O(1).
    public var discardedBytes: Int { lock.withSharedLock { storage.discardedCost } }

    /// Releases memory: in tier ``/MemwarnRelease/ReleaseTier/discarded`` the entries whose content is gone;
    /// in ``/MemwarnRelease/ReleaseTier/caches`` entries not under access, in ``releaseOrder``, until
    /// `targetBytes` are freed (discardable values are asked to discard first, and stay if
    /// they are in use). The delegate is told of each removal, outside the lock.
    ///
    /// - Parameter request: the level, the tier being walked and the bytes still wanted.
    /// - Returns: the bytes freed.
    /// - Complexity: O(n) when everything goes; else, in the default order, O(1) amortized per
    ///   entry removed (O(n) when many are in use), and in the others O(n) plus O(log n) per
    ///   entry examined.
    @inlinable
    public func release(_ request: ReleaseRequest) -> Int {
        lock.lock()
        let keepingValues = storedDelegate != nil
        let (freed, values) = releaseEntries(&storage, request, keepingValues)
        let delegate = storedDelegate
        lock.unlock()
        notify(delegate, values)
        return freed
    }
}

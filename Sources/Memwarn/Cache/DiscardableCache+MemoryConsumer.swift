extension DiscardableCache {
    /// The sum of the entries' costs (cost is bytes).
    public var footprintBytes: Int { totalCost }

    /// The cost of entries whose content was already discarded.
    ///
    /// - Complexity: O(n) when the cache holds discardable content, else O(1).
    public var discardedBytes: Int { lock.withLock { storage.discardedCost } }

    /// Releases memory: in tier ``ReleaseTier/discarded`` the entries whose content is gone;
    /// in ``ReleaseTier/caches`` entries not under access, largest cost first, until
    /// `targetBytes` are freed (discardable values are asked to discard first, and stay if
    /// they are in use). The delegate is told of each removal, outside the lock.
    ///
    /// - Parameter request: the level, the tier being walked and the bytes still wanted.
    /// - Returns: the bytes freed.
    /// - Complexity: O(n) when everything goes; else O(n) plus O(log n) per entry examined.
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

// What the monitor's proactive trim reads and sets (see ``/MemwarnRelease/TrimmableConsumer``).
extension DiscardableCache {
    /// How many sets stored a key the cache did not hold (its refills): it only grows. The
    /// proactive trim compares its rate from one step to the next.
    public var refillCount: Int { lock.withSharedLock { storage.refills } }

    /// The proactive trim's ceiling on the total cost, in bytes; `nil` for none (the default).
    ///
    /// The cache keeps to the smaller of this and ``totalCostLimit``, evicting in the limits'
    /// order at once when the ceiling falls below ``totalCost``; ``totalCostLimit`` still reads
    /// the limit you set. Only the monitor's trim sets it (`trim_interval` in the policy); a
    /// monitor that stops lifts the ceilings it set. A value of 0 or below counts as no ceiling.
    public var trimCeilingBytes: Int? {
        get { lock.withSharedLock { storage.trimCostLimit == 0 ? nil : storage.trimCostLimit } }
        set { changeLimits { $0.setCostLimits(own: $0.ownCostLimit, trim: max(0, newValue ?? 0)) } }
    }
}

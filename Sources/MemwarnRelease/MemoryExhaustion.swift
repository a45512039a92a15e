/// Memory is exhausted: every tier was asked and usage is still at the critical mark.
///
/// The monitor's release loop enters this state after a release at `.critical` (every tier
/// allowed) that could not meet its target, when usage read afterwards is still at or above
/// the critical mark: nothing memwarn can release is left, and what remains — the **floor** —
/// is memory the service itself holds. It leaves the state when usage falls below the warning
/// mark. While exhausted a service should shed load (refuse new work, answer 503 with
/// `Retry-After`) rather than grow into the OOM killer; read
/// `PressureMonitor.isMemoryExhausted` per request, or observe changes with
/// `PressureMonitor.addExhaustionObserver(_:)`.
public struct MemoryExhaustion: Sendable, Hashable {
    /// Whether memory is exhausted from now on (`false`: the state ended).
    public var isExhausted: Bool
    /// Usage right after the release that found nothing more to give: memory no tier can give
    /// back. On leaving the state, the floor that was reported on entering it.
    public var floorBytes: UInt64
    /// Bytes the last release could still have freed: 0 while exhausted.
    public var releasableBytes: Int
    /// Bytes still held by registered consumers but in use (not releasable now): of each holder,
    /// what it says is in use (``Holder/inUseBytes``), or all it holds when it does not say.
    public var heldInUseBytes: Int
    /// Who holds ``heldInUseBytes``: the consumers still holding memory after the release that
    /// asked every tier, the most first (at most 16; the rest are in ``heldInUseBytes`` only).
    /// A cache of `PurgeableData` whose content was never ended (`endContentAccess()`) shows
    /// here with all it holds. Empty on leaving the state.
    public var holders: [Holder] = []

    /// A consumer holding memory in use.
    public struct Holder: Sendable, Hashable {
        /// The consumer's name.
        public var consumer: String
        /// Its tier.
        public var tier: ReleaseTier
        /// What it holds.
        public var bytes: Int
        /// What of ``bytes`` it says is in use (``MemoryConsumer/inUseBytes``): held by work in
        /// flight, not a release that failed; `nil` when it does not say.
        public var inUseBytes: Int?

        /// A holder.
        ///
        /// - Parameters:
        ///   - consumer: the consumer's name.
        ///   - tier: its tier.
        ///   - bytes: what it holds.
        package init(consumer: String, tier: ReleaseTier, bytes: Int) {
            self.consumer = consumer
            self.tier = tier
            self.bytes = bytes
        }
    }
    /// Usage when the state changed.
    public var usageBytes: UInt64
    /// The effective limit, or the machine's memory when no limit applies.
    public var capacityBytes: UInt64?
    /// The measured growth in bytes a second (0 when usage is not clearly growing).
    public var growthBytesPerSecond: Double
    /// When the state changed: time since the Unix epoch.
    public var time: Duration

    /// Creates a state change.
    ///
    /// - Parameters:
    ///   - isExhausted: whether memory is exhausted from now on.
    ///   - floorBytes: usage right after the release that found nothing more to give.
    ///   - releasableBytes: bytes the last release could still have freed.
    ///   - heldInUseBytes: bytes registered consumers hold in use.
    ///   - usageBytes: usage when the state changed.
    ///   - capacityBytes: the effective limit, or the machine's memory.
    ///   - growthBytesPerSecond: the measured growth in bytes a second.
    ///   - time: when the state changed, since the Unix epoch.
    package init(
        isExhausted: Bool, floorBytes: UInt64, releasableBytes: Int, heldInUseBytes: Int, usageBytes: UInt64,
        capacityBytes: UInt64?, growthBytesPerSecond: Double, time: Duration
    ) {
        self.isExhausted = isExhausted
        self.floorBytes = floorBytes
        self.releasableBytes = releasableBytes
        self.heldInUseBytes = heldInUseBytes
        self.usageBytes = usageBytes
        self.capacityBytes = capacityBytes
        self.growthBytesPerSecond = growthBytesPerSecond
        self.time = time
    }
}

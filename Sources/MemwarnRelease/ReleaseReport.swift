import MemwarnSystem

/// What one release did, consumer by consumer, in the order they were asked.
public struct ReleaseReport: Sendable, Hashable {
    /// One consumer's part.
    public struct Entry: Sendable, Hashable {
        /// The consumer's name.
        public var consumer: String
        /// The tier it was asked in (a consumer with discarded content is asked twice:
        /// once in ``ReleaseTier/discarded``, once in its own tier).
        public var tier: ReleaseTier
        /// Its footprint before it was asked.
        public var bytesBefore: Int
        /// Its footprint after it answered.
        public var bytesAfter: Int
        /// What it said it freed.
        public var bytesFreed: Int
        /// How long it took.
        public var duration: Duration
        /// What it still held in use, asked in its own tier for more than it gave: memory no
        /// release can take now — buffers lent to running work, content being accessed (a
        /// `PurgeableData` or other `DiscardableContent` between `beginContentAccess()` and
        /// `endContentAccess()`, or one never ended after it was made: it starts accessed).
        /// The consumer's own ``MemoryConsumer/inUseBytes`` when it says (at most what it still
        /// held), else all it still held. 0 when it gave all it was asked for.
        public var bytesInUse: Int = 0

        /// One consumer's part (the coordinator makes these; so may a test or a decoder).
        ///
        /// - Parameters:
        ///   - consumer: the consumer's name.
        ///   - tier: the tier it was asked in.
        ///   - bytesBefore: its footprint before it was asked.
        ///   - bytesAfter: its footprint after it answered.
        ///   - bytesFreed: what it said it freed.
        ///   - duration: how long it took.
        ///   - bytesInUse: what it still held in use (0 when it gave all it was asked for).
        package init(
            consumer: String, tier: ReleaseTier, bytesBefore: Int, bytesAfter: Int, bytesFreed: Int, duration: Duration, bytesInUse: Int = 0
        ) {
            self.consumer = consumer
            self.tier = tier
            self.bytesBefore = bytesBefore
            self.bytesAfter = bytesAfter
            self.bytesFreed = bytesFreed
            self.duration = duration
            self.bytesInUse = bytesInUse
        }
    }

    /// The level behind the release.
    public var level: MemoryPressureLevel
    /// The bytes wanted: enough to bring usage back below the recovery mark (just under the
    /// warning mark for a monitor's release while its level stays at `warning`), less headroom
    /// for growth (``headroomBytes``).
    public var targetBytes: Int
    /// The part of ``targetBytes`` that is headroom for the growth expected before the next
    /// release can act (0 for a release on request).
    public var headroomBytes: Int = 0
    /// The growth rate the headroom was sized with, in bytes a second.
    public var growthBytesPerSecond: Double = 0
    /// The consumers asked, in order.
    public var entries: [Entry]
    /// The bytes freed in all: the entries' ``Entry/bytesFreed`` summed, held at `Int.max` (and
    /// `Int.min`) rather than overflowing, since a report may come from another process.
    public var freedBytes: Int { entries.lazy.map(\.bytesFreed).saturatingSum() }
    /// Whether the target was met.
    public var metTarget: Bool { freedBytes >= targetBytes }
    /// Whether freed heap was returned to the kernel (`malloc_trim(0)`, and the free pages of
    /// `PurgeableData`'s arena).
    public var trimmedHeap: Bool
    /// The whole release's duration, trimming included.
    public var duration: Duration

    /// A report (the coordinator makes these; so may a test or a decoder).
    ///
    /// - Parameters:
    ///   - level: the level behind the release.
    ///   - targetBytes: the bytes wanted, headroom included.
    ///   - headroomBytes: the part of `targetBytes` that is headroom for growth.
    ///   - growthBytesPerSecond: the growth rate the headroom was sized with.
    ///   - entries: the consumers asked, in order.
    ///   - trimmedHeap: whether freed heap was returned to the kernel.
    ///   - duration: the whole release's duration.
    package init(
        level: MemoryPressureLevel, targetBytes: Int, headroomBytes: Int = 0, growthBytesPerSecond: Double = 0, entries: [Entry], trimmedHeap: Bool,
        duration: Duration
    ) {
        self.level = level
        self.targetBytes = targetBytes
        self.headroomBytes = headroomBytes
        self.growthBytesPerSecond = growthBytesPerSecond
        self.entries = entries
        self.trimmedHeap = trimmedHeap
        self.duration = duration
    }

    /// The entries of consumers that held memory in use (``Entry/bytesInUse``), the most first:
    /// who holds what a release could not take.
    public var entriesInUse: [Entry] {
        entries.filter { $0.bytesInUse > 0 }.sorted { $0.bytesInUse > $1.bytesInUse }
    }
}

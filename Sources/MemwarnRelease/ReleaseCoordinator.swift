import MemwarnSystem

/// Releases memory from registered consumers in the documented order when memory is tight.
///
/// The order (also in the README): tier by tier — ``ReleaseTier/discarded``,
/// ``ReleaseTier/caches``, ``ReleaseTier/media``, then at `.critical` only
/// ``ReleaseTier/sharedResources`` and ``ReleaseTier/suspendedUnits`` — and within a tier
/// the largest consumer first. It stops once the target is met (discarded content is always
/// dropped: it is free), then gives what was freed back to the kernel
/// (``returnFreedMemory()``: `malloc_trim(0)`, or the cgroup's usage would not drop, and every
/// registered memory returner, such as `PurgeableData`'s arena).
///
/// ```swift
/// ReleaseCoordinator.shared.attach(to: monitor)   // release on every warning
/// ```
public final class ReleaseCoordinator: Sendable {
    /// The coordinator memwarn's own stores register with.
    public static let shared = ReleaseCoordinator()

    private struct State {
        var consumers: [ObjectIdentifier: WeakReference<any MemoryConsumer>] = [:]
        var totals = ReleaseTotals()
    }

    private let state = Locked(State())
    private let reports = Broadcaster<ReleaseReport>()
    /// The memory-warning responders, by registration (see `ReleaseCoordinator+MemoryWarning.swift`).
    let warningResponders = Locked(WarningResponders())
    /// Whether a release ends with ``returnFreedMemory()``.
    public let trimsHeap: Bool

    /// Creates a coordinator (most programs use ``shared``).
    ///
    /// - Parameter trimsHeap: whether a release that freed anything ends by returning freed
    ///   memory to the kernel (``returnFreedMemory()``).
    public init(trimsHeap: Bool = true) {
        self.trimsHeap = trimsHeap
    }

    /// Gives freed memory back to the kernel: malloc's free heap (`malloc_trim(0)`), then what
    /// every registered memory returner holds free (``addMemoryReturner(_:)``; memwarn's own is
    /// `PurgeableData`'s arena, which returns the pages no live block touches). A release
    /// with ``trimsHeap`` ends with this; call it yourself after freeing a lot outside a
    /// release. It costs a walk of malloc's free lists and of the arena's page counts, a few
    /// milliseconds for a gigabyte.
    public static func returnFreedMemory() {
        MallocHeap.trim()
        for returner in memoryReturners.withLock({ $0 }) { returner() }
    }

    private static let memoryReturners = Locked<[@Sendable () -> Void]>([])

    /// Adds a memory returner: something that holds memory it freed (an allocator of its own,
    /// a pool) and can give it back to the kernel. Every ``returnFreedMemory()`` calls it, after
    /// `malloc_trim(0)`, on the releasing thread. Returners stay for the life of the process.
    ///
    /// - Parameter returner: gives what is free back to the kernel (`madvise`, `munmap`…).
    public static func addMemoryReturner(_ returner: @escaping @Sendable () -> Void) {
        memoryReturners.withLock { $0.append(returner) }
    }

    /// Registers a consumer, weakly. Registering twice is harmless.
    ///
    /// - Parameter consumer: asked to release in its tier.
    public func register(_ consumer: any MemoryConsumer) {
        state.withLock { $0.consumers[ObjectIdentifier(consumer)] = WeakReference(consumer) }
    }

    /// Removes a consumer.
    ///
    /// - Parameter consumer: a registered consumer; one that is not is no error.
    public func unregister(_ consumer: any MemoryConsumer) {
        _ = state.withLock { $0.consumers.removeValue(forKey: ObjectIdentifier(consumer)) }
    }

    /// The live consumers (deallocated ones are dropped from the registry here).
    public var consumers: [any MemoryConsumer] {
        state.withLock { state in
            state.consumers = state.consumers.filter { $0.value.isAlive }
            return state.consumers.values.compactMap(\.object)
        }
    }

    /// Releases memory for a level until `targetBytes` are freed.
    ///
    /// - Parameters:
    ///   - level: `.warning` asks tiers up to ``ReleaseTier/media``; `.critical` asks all.
    ///     `.normal` releases nothing.
    ///   - targetBytes: the bytes wanted; 0 drops only discarded content.
    ///   - tiers: the tiers to walk (all by default), still in release order and only those
    ///     the level allows; `[.suspendedUnits]` terminates suspended units and nothing else.
    /// - Returns: the report, consumer by consumer in the order asked.
    /// - Complexity: O(c log c) for c consumers, plus what the consumers do.
    @discardableResult
    public func release(level: MemoryPressureLevel, targetBytes: Int, tiers: Set<ReleaseTier> = Set(ReleaseTier.all)) -> ReleaseReport {
        release(level: level, target: ReleaseTarget(bytes: targetBytes), tiers: tiers)
    }

    /// Releases memory for a level until the target is met; the report carries the target's
    /// headroom and growth.
    ///
    /// - Parameters:
    ///   - level: `.warning` asks tiers up to ``ReleaseTier/media``; `.critical` asks all.
    ///     `.normal` releases nothing.
    ///   - target: the bytes wanted, with the headroom they include.
    ///   - tiers: the tiers to walk (all by default), in release order and only those the level allows.
    /// - Returns: the report, consumer by consumer in the order asked.
    /// - Complexity: O(c log c) for c consumers, plus what the consumers do.
    @discardableResult
    package func release(level: MemoryPressureLevel, target: ReleaseTarget, tiers: Set<ReleaseTier> = Set(ReleaseTier.all)) -> ReleaseReport {
        let start = ContinuousClock.now
        var entries: [ReleaseReport.Entry] = []
        var remaining = target.bytes
        let live = level == .normal ? [] : consumers
        for tier in ReleaseTier.all where tier.minimumLevel <= level && tiers.contains(tier) {
            if tier != .discarded && remaining <= 0 { break }
            let candidates: [(consumer: any MemoryConsumer, size: Int)] =
                tier == .discarded
                ? live.map { ($0, $0.discardedBytes) }.filter { $0.1 > 0 }
                : live.filter { $0.tier == tier }.map { ($0, $0.footprintBytes) }.filter { $0.1 > 0 }
            for (consumer, _) in candidates.sorted(by: { $0.size > $1.size }) {
                if tier != .discarded && remaining <= 0 { break }
                let before = consumer.footprintBytes
                let began = ContinuousClock.now
                let asked = tier == .discarded ? Int.max : remaining
                let freed = consumer.release(ReleaseRequest(level: level, tier: tier, targetBytes: asked))
                let after = consumer.footprintBytes
                entries.append(
                    .init(
                        consumer: consumer.name, tier: tier, bytesBefore: before, bytesAfter: after,
                        bytesFreed: freed, duration: .now - began,
                        bytesInUse: tier != .discarded && freed < asked ? max(0, min(after, consumer.inUseBytes ?? after)) : 0))
                remaining -= freed
            }
        }
        let freedAny = entries.contains { $0.bytesFreed > 0 }
        if trimsHeap && freedAny { Self.returnFreedMemory() }
        var report = ReleaseReport(level: level, targetBytes: target.bytes, entries: entries, trimmedHeap: trimsHeap && freedAny, duration: .now - start)
        report.headroomBytes = target.headroomBytes
        report.growthBytesPerSecond = target.growthBytesPerSecond
        state.withLock { $0.totals.add(report) }
        reports.post(report)
        return report
    }

    /// What this coordinator has released since it was made.
    package var totals: ReleaseTotals { state.withLock { $0.totals } }

    /// Calls `observer` with every report (on the releasing thread).
    ///
    /// - Parameter observer: called with each release's report; it cannot be removed.
    public func addReportObserver(_ observer: @escaping @Sendable (ReleaseReport) -> Void) {
        _ = reports.addObserver(observer)
    }
}

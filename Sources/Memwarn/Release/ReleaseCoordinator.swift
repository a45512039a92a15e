import CLibcgroup

/// Releases memory from registered consumers in the documented order when memory is tight.
///
/// The order (also in the README): tier by tier — ``ReleaseTier/discarded``,
/// ``ReleaseTier/caches``, ``ReleaseTier/media``, then at `.critical` only
/// ``ReleaseTier/sharedResources`` and ``ReleaseTier/suspendedUnits`` — and within a tier
/// the largest consumer first. It stops once the target is met (discarded content is always
/// dropped: it is free), then returns freed heap to the kernel with `malloc_trim(0)`, or the
/// cgroup's usage would not drop, and the free pages of ``PurgeableData``'s arena with
/// `MADV_DONTNEED`.
///
/// ```swift
/// ReleaseCoordinator.shared.attach(to: monitor)   // release on every warning
/// ```
public final class ReleaseCoordinator: Sendable {
    /// The coordinator memwarn's own stores register with.
    public static let shared = ReleaseCoordinator()

    private final class WeakConsumer: @unchecked Sendable {
        // @unchecked: `consumer` is a weak reference written once at init; reads are atomic.
        weak var consumer: (any MemoryConsumer)?
        init(_ consumer: any MemoryConsumer) { self.consumer = consumer }
    }

    private struct State {
        var consumers: [ObjectIdentifier: WeakConsumer] = [:]
        var reportObservers: [Int: @Sendable (ReleaseReport) -> Void] = [:]
        var nextID = 0
    }

    private let state = Locked(State())
    /// Whether a release ends with `malloc_trim(0)` and returning the purgeable arena's free
    /// pages.
    public let trimsHeap: Bool

    /// Creates a coordinator (most programs use ``shared``).
    public init(trimsHeap: Bool = true) {
        self.trimsHeap = trimsHeap
    }

    /// Gives freed memory back to the kernel: malloc's free heap (`malloc_trim(0)`) and the
    /// pages of ``PurgeableData``'s arena that no live block touches (`MADV_DONTNEED`). A
    /// release with ``trimsHeap`` ends with this; call it yourself after freeing a lot outside
    /// a release. It costs a walk of malloc's free lists and of the arena's page counts, a few
    /// milliseconds for a gigabyte.
    public static func returnFreedMemory() {
        malloc_trim(0)
        PurgeableArena.shared.returnFreePages()
    }

    /// Registers a consumer, weakly. Registering twice is harmless.
    public func register(_ consumer: any MemoryConsumer) {
        state.withLock { $0.consumers[ObjectIdentifier(consumer)] = WeakConsumer(consumer) }
    }

    /// Removes a consumer.
    public func unregister(_ consumer: any MemoryConsumer) {
        _ = state.withLock { $0.consumers.removeValue(forKey: ObjectIdentifier(consumer)) }
    }

    /// The live consumers (deallocated ones are dropped from the registry here).
    public var consumers: [any MemoryConsumer] {
        state.withLock { state in
            state.consumers = state.consumers.filter { $0.value.consumer != nil }
            return state.consumers.values.compactMap(\.consumer)
        }
    }

    /// The bytes to free so that usage falls back below the recovery mark, or 0 when it
    /// already is (then only discarded content is dropped).
    public static func target(for snapshot: PressureSnapshot, policy: PressurePolicy) -> Int {
        guard let capacity = snapshot.capacityBytes else { return 0 }
        let recovery = Double(capacity) * policy.recoveryRatio
        return max(0, Int((Double(snapshot.usageBytes) - recovery).rounded(.up)))
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
        let start = ContinuousClock.now
        var entries: [ReleaseReport.Entry] = []
        var remaining = targetBytes
        let live = level == .normal ? [] : consumers
        for tier in ReleaseTier.all where tier.minimumLevel <= level && tiers.contains(tier) {
            if tier != .discarded && remaining <= 0 { break }
            let candidates: [(consumer: any MemoryConsumer, size: Int)] = tier == .discarded
                ? live.map { ($0, $0.discardedBytes) }.filter { $0.1 > 0 }
                : live.filter { $0.tier == tier }.map { ($0, $0.footprintBytes) }.filter { $0.1 > 0 }
            for (consumer, _) in candidates.sorted(by: { $0.size > $1.size }) {
                if tier != .discarded && remaining <= 0 { break }
                let before = consumer.footprintBytes
                let began = ContinuousClock.now
                let freed = consumer.release(ReleaseRequest(level: level, tier: tier, targetBytes: tier == .discarded ? .max : remaining))
                entries.append(.init(consumer: consumer.name, tier: tier, bytesBefore: before, bytesAfter: consumer.footprintBytes,
                                     bytesFreed: freed, duration: .now - began))
                remaining -= freed
            }
        }
        let freedAny = entries.contains { $0.bytesFreed > 0 }
        if trimsHeap && freedAny { Self.returnFreedMemory() }
        let report = ReleaseReport(level: level, targetBytes: targetBytes, entries: entries, trimmedHeap: trimsHeap && freedAny, duration: .now - start)
        let observers = state.withLock { Array($0.reportObservers.values) }
        for observer in observers { observer(report) }
        return report
    }

    /// Releases on every rise of a monitor's level to `.warning` or `.critical`, with the
    /// target computed from the event's snapshot and the monitor's policy.
    ///
    /// - Returns: the monitor's observer token (remove it to detach).
    @discardableResult
    public func attach(to monitor: PressureMonitor) -> PressureMonitor.ObserverToken {
        let policy = monitor.configuration.policy
        return monitor.addObserver { [self] event in
            guard event.level > (event.previous ?? .normal) else { return }
            release(level: event.level, targetBytes: Self.target(for: event.snapshot, policy: policy))
        }
    }

    /// Calls `observer` with every report (on the releasing thread).
    public func addReportObserver(_ observer: @escaping @Sendable (ReleaseReport) -> Void) {
        state.withLock { state in
            state.nextID += 1
            state.reportObservers[state.nextID] = observer
        }
    }
}

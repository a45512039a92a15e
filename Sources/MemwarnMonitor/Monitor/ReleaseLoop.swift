import Logging
import MemwarnRelease
import MemwarnSystem

#if canImport(Glibc)
import Glibc
#endif

/// The monitor's automatic release, on a thread of its own.
///
/// The monitor's event thread hands it every reading (``offer(_:)``) and goes back to
/// `epoll_wait` at once. The release thread keeps only the newest reading (and the highest
/// rise among those it skipped, so no rise is lost), and for it:
///
/// 1. on a rise, tells the coordinators' ``/MemwarnRelease/MemoryWarningResponder``s first (each waited for at
///    most its deadline), then reads usage afresh (what the responders dropped must count);
///    otherwise the reading itself serves while it is recent (``recentEnough``; older, usage is
///    read afresh), so a reading at normal costs the release thread no read at all;
/// 2. releases when the reading was a rise to `.warning` or `.critical`, or while the level
///    stays raised whenever usage is back at the warning mark — at the level the fresh numbers
///    ask for (never above the monitor's), to the ``/MemwarnRelease/ReleaseTarget`` with headroom for the
///    measured growth;
/// 3. reads usage again, records the drop in the ``ReleaseLedger`` (so the growth estimate adds
///    it back) and the duration (the next target's lead time);
/// 4. enters ``/MemwarnRelease/MemoryExhaustion`` when a release at `.critical` fell short and usage is still at
///    the critical mark, and leaves it once usage is below the warning mark.
///
/// At most one release is under way; a burst of readings becomes one release from fresh numbers.
final class ReleaseLoop: @unchecked Sendable {
    // @unchecked: `handOver` is a ConditionLock; `lastReleaseDuration` and `exhaustion` are
    // touched only on the release thread; everything else is immutable.
    struct Context: Sendable {
        var sampler: SnapshotSampler
        var policy: PressurePolicy
        /// Whether PSI's averages count toward a level (``MonitorConfiguration/watchesPressureStall``).
        var countsPressureStall: Bool
        var ledger: ReleaseLedger
        var metrics: MonitorMetrics
        var logger: Logger
        /// The coordinators attached to the monitor (read at each release).
        var coordinators: AttachedCoordinators
        /// The exhausted state changed.
        var exhaustionChanged: @Sendable (MemoryExhaustion) -> Void
    }

    private struct HandOver {
        var pending: MonitorReading?
        var stopping = false
    }

    private let context: Context
    private let handOver = ConditionLock(HandOver())
    private var lastReleaseDuration = Duration.zero
    private var exhaustion: MemoryExhaustion?

    init(context: Context) {
        self.context = context
    }

    /// Hands over a reading; never blocks on a release. Any thread.
    func offer(_ reading: MonitorReading) {
        handOver.withLock { handOver in
            var next = reading
            if let skipped = handOver.pending?.rise { next.rise = max(skipped, reading.rise ?? .normal) }
            handOver.pending = next
        }
    }

    /// Ends the thread after the release under way, if any. Any thread.
    func stop() {
        handOver.withLock { $0.stopping = true }
    }

    /// Runs on a new thread until ``stop()``, then calls `finished`.
    ///
    /// - Throws: ``SystemError`` when the thread cannot be started.
    func start(finished: @escaping @Sendable () -> Void) throws(SystemError) {
        try SystemThread.start(name: "memwarn-release") { [self] in
            while let reading = next() { handle(reading) }
            finished()
        }
    }

    private func next() -> MonitorReading? {
        handOver.wait(timeout: nil) { handOver -> MonitorReading?? in
            if handOver.stopping { return .some(nil) }
            guard let pending = handOver.pending else { return nil }
            handOver.pending = nil
            return .some(pending)
        } ?? nil
    }

    // MARK: Releasing (release thread)

    private func handle(_ reading: MonitorReading) {
        let policy = context.policy
        let level = reading.event.level
        let rose = (reading.rise ?? .normal) > .normal
        // A reading at normal that is no rise, outside exhaustion, asks for nothing: no read, no
        // release (most readings: every sample where usage is sampled).
        guard rose || level > .normal || exhaustion?.isExhausted == true else { return }
        let coordinators = context.coordinators.current
        let began = ContinuousClock.now
        // A rise is a memory warning: the coordinators' responders hear it first, and what they
        // drop shows in the fresh numbers below. Their drop is memwarn's doing, as a release's is:
        // the ledger counts it, measured from usage just before.
        var beforeWarning: PressureSnapshot?
        if let rise = reading.rise, rise > .normal, coordinators.contains(where: \.hasWarningResponders) {
            beforeWarning = current(reading).snapshot
            context.ledger.begin()
            for coordinator in coordinators {
                let delivery = coordinator.deliverMemoryWarning(level: rise)
                if delivery.overran > 0 {
                    context.logger.warning(
                        "memory-warning responders overran their deadline; releasing without waiting for them",
                        metadata: ["overran": "\(delivery.overran)", "level": "\(rise)"])
                }
            }
        }
        // After the responders, usage afresh (what they dropped must count); else the reading
        // itself while it is recent. A failed read is the monitor's to report (it reads the same
        // files): the reading stands in.
        let (fresh, age) = beforeWarning == nil ? current(reading) : ((try? context.sampler.sample()) ?? reading.event.snapshot, Duration.zero)
        if let exhaustion, exhaustion.isExhausted, level == .normal || fresh.levelRatio < policy.warningRatio {
            leaveExhaustion(fresh, growth: reading.growthBytesPerSecond)
        }
        var releaseLevel: MemoryPressureLevel?
        if let rise = reading.rise, rise > .normal {
            releaseLevel = rise
        } else if level > .normal, fresh.capacityBytes != nil, fresh.levelRatio >= policy.warningRatio {
            let asked = LevelEvaluator.candidate(
                for: fresh, current: .normal, hint: .normal, policy: policy,
                countsPressureStall: context.countsPressureStall)
            releaseLevel = min(level, max(.warning, asked))
        }
        guard let releaseLevel, !coordinators.isEmpty else {
            if let beforeWarning { context.ledger.end(droppedBytes: Self.drop(from: beforeWarning, to: fresh)) }
            return
        }

        // Usage grows while the reading ages: its age is lead time too.
        let target = ReleaseTarget.make(
            for: fresh, policy: policy, growthBytesPerSecond: reading.growthBytesPerSecond,
            leadTime: reading.detectionBound + lastReleaseDuration + age)
        if beforeWarning == nil { context.ledger.begin() }
        var remaining = target
        var freed = 0
        for coordinator in coordinators {
            let report = coordinator.release(level: releaseLevel, target: remaining)
            freed += report.freedBytes
            remaining.bytes = max(0, remaining.bytes - report.freedBytes)
            remaining.headroomBytes = min(remaining.headroomBytes, remaining.bytes)
            context.metrics.record(report, consumers: coordinator.consumers)
        }
        lastReleaseDuration = .now - began
        let after = try? context.sampler.sample()
        let dropped = after.map { Self.drop(from: beforeWarning ?? fresh, to: $0) } ?? UInt64(max(0, freed))
        context.ledger.end(droppedBytes: dropped)

        guard let after, let capacity = after.capacityBytes else { return }
        let stillCritical = after.levelRatio >= min(policy.criticalRatio, 1)
        if releaseLevel == .critical, freed < target.bytes, stillCritical, exhaustion?.isExhausted != true {
            let holders = coordinators.flatMap(\.consumers).map { consumer in
                let held = consumer.footprintBytes
                var holder = MemoryExhaustion.Holder(consumer: consumer.name, tier: consumer.tier, bytes: held)
                holder.inUseBytes = consumer.inUseBytes.map { min(max(0, $0), max(0, held)) }  // the consumer's word, within what it holds
                return holder
            }
            .filter { $0.bytes > 0 }.sorted { $0.bytes > $1.bytes }
            var entered = MemoryExhaustion(
                isExhausted: true, floorBytes: after.usageBytes, releasableBytes: 0,
                heldInUseBytes: holders.lazy.map { min($0.bytes, $0.inUseBytes ?? $0.bytes) }.saturatingSum(),
                usageBytes: after.usageBytes, capacityBytes: capacity,
                growthBytesPerSecond: reading.growthBytesPerSecond, time: after.time)
            entered.holders = Array(holders.prefix(16))
            exhaustion = entered
            context.logger.error(
                "memory exhausted: every tier released and usage is still at the critical mark",
                metadata: [
                    "floor": "\(after.usageBytes)", "capacity": "\(capacity)", "growthBytesPerSecond": "\(Int(reading.growthBytesPerSecond))",
                    "heldInUse": "\(entered.heldInUseBytes)",
                    "holders": "\(holders.prefix(5).map(\.description).joined(separator: ", "))",
                ])
            context.exhaustionChanged(entered)
        }
    }

    /// The reading's snapshot while it is at most ``recentEnough`` old (the release thread
    /// usually takes it within a millisecond), else a fresh one (age zero): one reading serves
    /// the level, the growth and the release target. The age is measured on the monotonic clock.
    /// A fresh read that fails leaves the reading, with its age.
    private func current(_ reading: MonitorReading) -> (snapshot: PressureSnapshot, age: Duration) {
        let age = ContinuousClock.now - reading.readAt
        guard age > Self.recentEnough else { return (reading.event.snapshot, age) }
        guard let fresh = try? context.sampler.sample() else { return (reading.event.snapshot, age) }
        return (fresh, .zero)
    }

    /// How old a reading may be and still size a release: 10 ms, the event-driven detection
    /// bound (at 1 GiB/s, 10 MiB of growth, which the target's lead time covers).
    static let recentEnough = MonitorReading.eventDrivenDetection

    /// How far usage fell between two readings (0 when it rose): the cgroup's own usage, what
    /// this process's release can have freed (a limited ancestor's usage, when it binds, moves
    /// with the siblings too, and the binding limit may change between the two readings).
    private static func drop(from before: PressureSnapshot, to after: PressureSnapshot) -> UInt64 {
        let (was, now) = (before.cgroupUsageBytes ?? before.usageBytes, after.cgroupUsageBytes ?? after.usageBytes)
        return was > now ? was - now : 0
    }

    private func leaveExhaustion(_ fresh: PressureSnapshot, growth: Double) {
        guard var left = exhaustion else { return }
        left.isExhausted = false
        left.holders = []
        left.usageBytes = fresh.usageBytes
        left.capacityBytes = fresh.capacityBytes
        left.growthBytesPerSecond = growth
        left.time = fresh.time
        exhaustion = left
        context.logger.notice("memory no longer exhausted", metadata: ["usage": "\(fresh.usageBytes)"])
        context.exhaustionChanged(left)
    }
}

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
/// rise among those it skipped, so no rise is lost). Each reading carries the level machine's
/// decision (``MonitorReading/releaseLevel``, from the ``LevelMachine``): the pressure level, and
/// whether a release is due and at which level, are decided there, never here. What the release
/// thread decides is the rest:
/// whether a reading is still fresh enough to act on (one read before the latest release ended
/// is replaced by a fresh reading, unless it is a rise), how much to release and from which
/// measurement, and when memory is exhausted — it enters and leaves
/// ``/MemwarnRelease/MemoryExhaustion`` itself, and tells the monitor. For a reading that asks for
/// a release:
///
/// 1. on a rise, tells the coordinators' ``/MemwarnRelease/MemoryWarningResponder``s first (each
///    waited for at most its deadline), then measures what they freed; otherwise the reading's
///    own snapshot sizes the release (a reading at normal costs the release thread no read at
///    all), its age added to the lead time;
/// 2. releases at the decided level to the `ReleaseTarget` with headroom for
///    the measured growth: below the recovery mark, or, for a release while the level stays
///    raised at `warning`, just under the warning mark (``ReleaseDepth``);
/// 3. measures usage again, records the drop in the ``ReleaseLedger`` (so the growth estimate
///    adds it back) and the duration (the next target's lead time); a reading taken before the
///    release ended is stale: a rise among them is sized from the measurement, for any other the
///    engine is asked for a reading now (``Context/askForReading``), which decides afresh;
/// 4. enters ``/MemwarnRelease/MemoryExhaustion`` when a release at `.critical` fell short and
///    usage is still at the critical mark (or the limit, when that mark lies above it), and
///    leaves it on the first reading it acts on whose level is `.normal` or whose usage
///    (``PressureSnapshot/levelRatio``) is below the warning mark.
///
/// At most one release is under way; a burst of readings becomes one release. When the policy
/// turns the proactive trim on, its steps run here too, between releases (``ProactiveTrim``), at
/// the level of the newest reading — `.critical` while memory is exhausted.
final class ReleaseLoop: MonitorReadingConsumer, @unchecked Sendable {
    // @unchecked: `handOver` is a ConditionLock; `lastReleaseDuration`, `exhaustion` and the
    // trim's state are touched only on the release thread; everything else is immutable.
    struct Context: Sendable {
        var sampler: SnapshotSampler
        var policy: PressurePolicy
        /// The time readings are stamped in (the engine's loop's clock).
        var clock: LoopClock
        var ledger: ReleaseLedger
        var metrics: MonitorMetrics
        var logger: Logger
        /// The coordinators attached to the monitor (read at each release).
        var coordinators: AttachedCoordinators
        /// The exhausted state changed.
        var exhaustionChanged: @Sendable (MemoryExhaustion) -> Void
        /// Asks the engine for a reading now (on its loop thread): a reading taken before the
        /// latest release ended shows usage from before it, and a newer one decides.
        var askForReading: @Sendable () -> Void
    }

    private struct HandOver {
        var pending: MonitorReading?
        var stopping = false
        /// The level of the newest reading offered (the trim steps only at `.normal`).
        var level = MemoryPressureLevel.normal
    }

    /// What the release thread does next.
    private enum Work {
        case release(MonitorReading)
        case trimStep
    }

    private let context: Context
    private let handOver = ConditionLock(HandOver())
    private var lastReleaseDuration = Duration.zero
    private var exhaustion: MemoryExhaustion?
    /// When the latest release ended, and its measurement (`nil` when that read failed):
    /// readings taken before it show usage from before that release.
    private var lastRelease: (endedAt: ContinuousClock.Instant, measured: PressureSnapshot?)?
    /// The proactive trim, when the policy turns it on; used on the release thread only.
    private let trim: ProactiveTrim?

    init(context: Context) {
        self.context = context
        trim = ProactiveTrim(policy: context.policy, logger: context.logger, metrics: context.metrics, startingAt: context.clock.now)
    }

    /// Hands over a reading; never blocks on a release. Any thread.
    func offer(_ reading: MonitorReading) {
        handOver.withLock { handOver in
            var next = reading
            if let skipped = handOver.pending?.rise {
                next.rise = max(skipped, reading.rise ?? .normal)
                next.releaseLevel = max(skipped, reading.releaseLevel ?? .normal)
            }
            handOver.pending = next
            handOver.level = reading.event.level
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
            while let work = next() {
                switch work {
                case .release(let reading): handle(reading)
                case .trimStep: takeTrimStep()
                }
            }
            trim?.liftAll()  // no monitor, no trim
            finished()
        }
    }

    /// Handles the reading waiting, if any, on the calling thread: the release thread's work, for
    /// a test that drives an engine on a manual clock (the thread is not started then).
    func handleWaitingReading() {
        if let reading = handOver.withLock({ handOver in
            defer { handOver.pending = nil }
            return handOver.pending
        }) {
            handle(reading)
        }
    }

    /// Waits for a reading, or for the trim's next step; `nil` once stopping.
    private func next() -> Work? {
        let untilStep = trim.map { max(.zero, $0.nextStepAt - context.clock.now) }
        let taken = handOver.wait(timeout: untilStep) { handOver -> MonitorReading?? in
            if handOver.stopping { return .some(nil) }
            guard let pending = handOver.pending else { return nil }
            handOver.pending = nil
            return .some(pending)
        }
        switch taken {
        case .none: return .trimStep  // the wait ended at the step's time
        case .some(.none): return nil
        case .some(.some(let reading)): return .release(reading)
        }
    }

    /// Takes a step of the proactive trim: at the monitor's level, with a reading of its own (for
    /// PSI; a failed read holds the step). On the release thread, or in a test that drives the
    /// loop on a manual clock without starting the thread.
    func takeTrimStep() {
        guard let trim else { return }
        let level = max(handOver.withLock { $0.level }, exhaustion?.isExhausted == true ? .critical : .normal)
        let snapshot = try? context.sampler.measure()
        trim.step(at: context.clock.now, level: level, snapshot: snapshot, coordinators: context.coordinators.current)
    }

    // MARK: Releasing (release thread)

    private func handle(_ reading: MonitorReading) {
        let policy = context.policy
        let level = reading.event.level
        // A reading that asks for no release, outside exhaustion, asks for nothing: no read (most
        // readings: every sample where usage is sampled).
        guard reading.releaseLevel != nil || exhaustion?.isExhausted == true else { return }
        var (snapshot, age) = (reading.event.snapshot, context.clock.now - reading.readAt)
        if let last = lastRelease, last.endedAt > reading.readAt {
            // Taken before the latest release ended: its usage is from before that release. A
            // rise is acted on (its memory warning is due), sized from the release's measurement;
            // anything else waits for a reading from after it, asked for now.
            guard reading.rise != nil else {
                context.askForReading()
                return
            }
            if let measured = last.measured { (snapshot, age) = (measured, context.clock.now - last.endedAt) }
        }
        let coordinators = context.coordinators.current
        let began = context.clock.now
        // A rise is a memory warning: the coordinators' responders hear it first, and what they
        // drop is measured. Their drop is memwarn's doing, as a release's is: the ledger counts it.
        var beforeWarning: PressureSnapshot?
        if let rise = reading.rise, rise > .normal, coordinators.contains(where: \.hasWarningResponders) {
            beforeWarning = snapshot
            context.ledger.begin()
            for coordinator in coordinators {
                let delivery = coordinator.deliverMemoryWarning(level: rise)
                if delivery.overran > 0 {
                    context.logger.warning(
                        "memory-warning responders overran their deadline; releasing without waiting for them",
                        metadata: ["overran": "\(delivery.overran)", "level": "\(rise)"])
                }
            }
            // A failed read is the monitor's to report (it reads the same files): the reading stands in.
            if let measured = try? context.sampler.measure() { (snapshot, age) = (measured, .zero) }
        }
        if let exhaustion, exhaustion.isExhausted, level == .normal || LevelMarks.asked(byRatio: snapshot.levelRatio, policy: policy).level == .normal {
            leaveExhaustion(snapshot, growth: reading.growthBytesPerSecond)
        }
        guard let releaseLevel = reading.releaseLevel, !coordinators.isEmpty else {
            if let beforeWarning { context.ledger.end(droppedBytes: Self.drop(from: beforeWarning, to: snapshot)) }
            return
        }
        // Usage grows while the reading ages: its age is lead time too.
        // A release while the level stays raised at `warning` takes usage just under the warning
        // mark; a rise's, or one at `critical`, below the recovery mark.
        let target = ReleaseTarget.make(
            for: snapshot, under: .of(reading.event, rise: reading.rise, releaseAt: releaseLevel, growthBytesPerSecond: reading.growthBytesPerSecond),
            policy: policy,
            growthBytesPerSecond: reading.growthBytesPerSecond,
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
        let ended = context.clock.now
        lastReleaseDuration = ended - began
        let after = try? context.sampler.measure()
        lastRelease = (ended, after)
        let dropped = after.map { Self.drop(from: beforeWarning ?? snapshot, to: $0) } ?? UInt64(max(0, freed))
        context.ledger.end(droppedBytes: dropped)
        if let after, releaseLevel == .critical, freed < target.bytes {
            enterExhaustionIfStillCritical(after, coordinators: coordinators, growth: reading.growthBytesPerSecond)
        }
    }

    /// Enters exhaustion when a release at `.critical` fell short and usage is still at the
    /// critical mark.
    private func enterExhaustionIfStillCritical(_ after: PressureSnapshot, coordinators: [ReleaseCoordinator], growth: Double) {
        guard let capacity = after.capacityBytes, LevelMarks.isAtCriticalOrLimit(ratio: after.levelRatio, policy: context.policy),
            exhaustion?.isExhausted != true
        else { return }
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
            usageBytes: after.usageBytes, capacityBytes: capacity, growthBytesPerSecond: growth, time: after.time)
        entered.holders = Array(holders.prefix(16))
        exhaustion = entered
        context.logger.error(
            "memory exhausted: every tier released and usage is still at the critical mark",
            metadata: [
                "floor": "\(after.usageBytes)", "capacity": "\(capacity)", "growthBytesPerSecond": "\(Int(growth))",
                "heldInUse": "\(entered.heldInUseBytes)",
                "holders": "\(holders.prefix(5).map(\.description).joined(separator: ", "))",
            ])
        context.exhaustionChanged(entered)
    }

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

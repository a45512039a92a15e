import Logging
import MemwarnRelease
import MemwarnSystem

/// The proactive trim at work: every ``PressurePolicy/trimInterval`` the release thread asks it
/// for a step, and it lowers or raises the ceilings of the attached coordinators'
/// ``/MemwarnRelease/TrimmableConsumer``s as the ``TrimPlanner`` decides.
///
/// Used on the release thread only, so a step never runs beside a release. When the monitor's
/// run ends it lifts every ceiling it set and that is still in place (``liftAll()``): without a
/// monitor there is no trim. A step that lowered a ceiling ends as a release does, with the
/// freed heap returned to the kernel when a coordinator returns it (``/MemwarnRelease/ReleaseCoordinator/trimsHeap``):
/// memory freed inside malloc would not lower the cgroup's usage.
final class ProactiveTrim {
    private var planner: TrimPlanner
    private let stallPercent: Double
    private let logger: Logger
    private let metrics: MonitorMetrics
    /// The consumers whose ceiling it set, and the ceiling, to lift at the end (unless another
    /// trim, a new session's, has set another since).
    private var ceilinged: [ObjectIdentifier: (consumer: WeakReference<any TrimmableConsumer>, ceiling: Int)] = [:]
    /// When the next step is due.
    private(set) var nextStepAt: ContinuousClock.Instant

    /// A trim for a policy whose ``PressurePolicy/trimInterval`` is set; `nil` when it is not.
    init?(policy: PressurePolicy, logger: Logger, metrics: MonitorMetrics, startingAt now: ContinuousClock.Instant) {
        guard policy.trimInterval > .zero else { return nil }
        planner = TrimPlanner(settings: .init(stepFraction: policy.trimStepPercent / 100, interval: policy.trimInterval))
        stallPercent = policy.trimStallPercent
        self.logger = logger
        self.metrics = metrics
        nextStepAt = now + policy.trimInterval
    }

    /// Takes one step.
    ///
    /// - Parameters:
    ///   - now: the step's time.
    ///   - level: the monitor's level now.
    ///   - snapshot: a reading taken for the step; `nil` when the read failed (no step down then).
    ///   - coordinators: the coordinators attached now.
    func step(at now: ContinuousClock.Instant, level: MemoryPressureLevel, snapshot: PressureSnapshot?, coordinators: [ReleaseCoordinator]) {
        nextStepAt = now + planner.settings.interval
        let consumers = coordinators.flatMap(\.consumers).compactMap { $0 as? any TrimmableConsumer }
        let byID = Dictionary(consumers.map { (ObjectIdentifier($0), $0) }, uniquingKeysWith: { first, _ in first })
        let observations = byID.map { id, consumer in
            TrimPlanner.Observation(
                id: id, footprintBytes: consumer.footprintBytes, inUseBytes: consumer.inUseBytes, refillCount: consumer.refillCount,
                ceilingBytes: consumer.trimCeilingBytes)
        }
        let stall = snapshot?.pressure?.some.avg10 ?? 0
        let pressed = level > .normal || snapshot == nil || stall >= stallPercent
        var lowered = false
        for change in planner.step(at: now, pressed: pressed, consumers: observations) {
            guard let consumer = byID[change.id] else { continue }
            consumer.trimCeilingBytes = change.ceilingBytes
            if let ceiling = change.ceilingBytes {
                ceilinged[change.id] = (WeakReference(consumer), ceiling)
            } else {
                ceilinged[change.id] = nil
            }
            lowered = lowered || change.outcome == .lowered
            report(change, of: consumer)
            metrics.recordTrim(change.outcome)
        }
        if lowered, coordinators.contains(where: \.trimsHeap) { ReleaseCoordinator.returnFreedMemory() }
    }

    private func report(_ change: TrimPlanner.Change, of consumer: any TrimmableConsumer) {
        switch change.reason {
        case .step:
            logger.debug("proactive trim: a step down", metadata: ["consumer": "\(consumer.name)", "ceiling_bytes": "\(change.ceilingBytes ?? 0)"])
        case .refillsRose(let expected, let refilled):
            logger.notice(
                "proactive trim backed off: refills rose",
                metadata: [
                    "consumer": "\(consumer.name)", "refilled": "\(refilled)", "expected": "\(Int(expected.rounded()))",
                    "ceiling_bytes": "\(change.ceilingBytes ?? 0)",
                ])
        case .lifted:
            logger.notice("proactive trim lifted a ceiling: refills rose while the consumer held well under it", metadata: ["consumer": "\(consumer.name)"])
        }
    }

    /// Lifts every ceiling the trim set that is still the one it set.
    func liftAll() {
        for (reference, ceiling) in ceilinged.values {
            guard let consumer = reference.object, consumer.trimCeilingBytes == ceiling else { continue }
            consumer.trimCeilingBytes = nil
        }
        ceilinged = [:]
    }
}

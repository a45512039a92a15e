import CgroupKit
import Logging
import MemwarnSystem

/// cgroup v1 as root: the usage thresholds of the limits a reading names, registered off the
/// loop thread (``ThresholdRegistrar``), watched on it, and planned again when the limits change.
///
/// Confined to the monitor's loop thread. Until the thresholds are in, usage is sampled
/// continuously; once they are, only in the guard bands below the marks (``UsageSampling``).
final class ThresholdPlanner {
    private let cgroup: CgroupLocation
    private let sampling: UsageSampling
    private let loop: EventLoop
    private let files: KernelFiles
    private let policy: PressurePolicy
    private let logger: Logger
    /// Called on the loop thread when a registered threshold fires.
    private let fired: (CgroupV1Notification, EpollEvents) -> Void
    /// Called on the loop thread when thresholds came in or the way usage is watched changed.
    private let changed: (Change) -> Void
    /// The limits the thresholds are planned for, nearest first.
    private var limits: [PlannedLimit]
    /// The thresholds registered and watched.
    private var watched: [(notification: CgroupV1Notification, registration: EventLoop.Registration)] = []
    /// A note on thresholds still being registered, or on why none are.
    private var note: String?
    /// Set when the thresholds are planned again or torn down: the registrar under way then stops
    /// (each registrar has its own).
    private var registrarCancelled = Locked(false)
    /// Thresholds still being registered (at start, or for a new limit).
    private(set) var pending = 0

    /// How long a threshold that fired is not listened to (``SamplingRule/guardLongestInterval``):
    /// a crossing the kernel reports meanwhile is read when the pause ends, at most that late.
    ///
    /// Usage that rests on a threshold and goes up and down across it (a service that maps and
    /// unmaps a buffer per request) makes the kernel report a crossing at each of its checks, every
    /// 128 page events a CPU: 200 reports a second were measured (the `idle` benchmark), each a
    /// full reading. With the pause a threshold costs at most 10 readings a second. Only the
    /// threshold that fired is paused (each has an eventfd of its own).
    ///
    /// The price: a threshold crossed again within 100 ms of its last report is read up to 100 ms
    /// late, where ``MonitorReading/eventDrivenDetection`` says 10 ms. Crossing one threshold
    /// back and forth is usage that goes nowhere, so no growth is missed in that time; a mark's
    /// guard band samples below the mark as before, in parallel (every 100 ms at most, sooner
    /// while usage rises), but gives no sooner bound.
    static let quietAfterFiring = SamplingRule.guardLongestInterval

    /// A limit as the thresholds were planned for it (a reading's constraint less its usage).
    struct PlannedLimit: Equatable, CustomStringConvertible {
        var cgroupPath: String
        var file: String
        var bytes: UInt64
        var description: String { "\(cgroupPath)|\(file)=\(bytes)" }
    }

    /// What a change of the planner asks of the engine.
    enum Change {
        /// Only its lines changed (``lines``).
        case lines
        /// How usage is watched changed (the thresholds are in, or usage is sampled continuously
        /// again), after registering took `after`: read usage again on the new terms.
        case usageWatch(after: Duration)
    }

    init(
        cgroup: CgroupLocation, sampling: UsageSampling, loop: EventLoop, files: KernelFiles, policy: PressurePolicy, logger: Logger,
        plannedFor snapshot: PressureSnapshot, fired: @escaping (CgroupV1Notification, EpollEvents) -> Void,
        changed: @escaping (Change) -> Void
    ) {
        self.cgroup = cgroup
        self.sampling = sampling
        self.loop = loop
        self.files = files
        self.policy = policy
        self.logger = logger
        self.fired = fired
        self.changed = changed
        limits = Self.limits(of: snapshot)
    }

    /// Its lines in `watchedSources`: every threshold watched, then the note.
    var lines: [String] { watched.map(\.notification.description) + (note.map { [$0] } ?? []) }

    /// Starts registering the plan's thresholds (the source plan made them from the first reading).
    func start(_ plan: ThresholdRegistrar.Plan) throws(SystemError) {
        pending = plan.requests.count
        note = "usage thresholds: \(plan.requests.count) being registered (the kernel takes an RCU grace period for each)"
        try startRegistrar(plan)
    }

    /// When a reading names other limits than the thresholds were planned for (a limit lowered or
    /// raised at run time, one set where there was none, an ancestor's appeared or went), the
    /// thresholds of the old limits are unregistered, usage is sampled continuously again, and
    /// the new limits' thresholds are registered behind it. Without this the thresholds stayed in
    /// bytes of the starting limit: a cut from 1 GiB to 100 MiB left usage at 85 % of the new
    /// limit unreported. Every full reading asks: a comparison in place, nothing made.
    ///
    /// - Returns: whether the thresholds were planned again.
    func replanIfTheLimitsChanged(_ snapshot: PressureSnapshot) -> Bool {
        guard !namesThePlannedLimits(snapshot) else { return false }
        let before = limits
        limits = Self.limits(of: snapshot)
        unwatchAll()
        sampling.leaveGuardedMode()
        let requests = SourcePlan.thresholdRequests(for: snapshot.constraintsToWatch, of: cgroup, sampling: sampling, policy: policy)
        logger.notice(
            "memory monitor: a limit changed; the usage thresholds are planned again",
            metadata: ["before": "\(Self.describe(before))", "after": "\(Self.describe(limits))", "thresholds": "\(requests.count)"])
        pending = requests.count
        guard !requests.isEmpty else {
            note = nil
            sampling.reason = "no cgroup limit"
            return true
        }
        note = "usage thresholds: \(requests.count) being registered for the new limit (the kernel takes an RCU grace period for each)"
        sampling.reason = "until the usage thresholds for the new limit are registered, then only in the guard bands below the marks"
        do {
            try startRegistrar(ThresholdRegistrar.Plan(files: files, requests: requests))
        } catch {
            pending = 0
            note = "usage thresholds: none registered for the new limit (\(error)); usage is sampled continuously"
            logger.warning(
                "memory monitor: the usage thresholds for a new limit could not be registered; usage is sampled continuously instead",
                metadata: ["error": "\(error)"])
        }
        return true
    }

    /// Pauses a threshold that fired, as its drain asked (``quietAfterFiring``); a source not
    /// watched here is left as it is.
    func watch(_ source: any PressureSource, as followUp: PressureSourceFollowUp) {
        guard case .pause(let quiet) = followUp, let registration = watched.first(where: { $0.notification === source })?.registration else { return }
        do {
            try loop.pause(registration, for: quiet) { [logger, description = source.description] error in
                logger.warning("a paused usage threshold could not be watched again", metadata: ["threshold": "\(description)", "error": "\(error)"])
            }
        } catch {
            // Not paused: it goes on firing, which costs readings, not correctness.
            logger.debug("a usage threshold could not be paused", metadata: ["threshold": "\(source.description)", "error": "\(error)"])
        }
    }

    /// Unwatches and closes every threshold and stops the registrar under way. Loop thread.
    func tearDown() {
        unwatchAll()
    }

    private func unwatchAll() {
        registrarCancelled.withLock { $0 = true }
        for (notification, registration) in watched {
            loop.unwatch(registration)
            notification.tearDown()
        }
        watched = []
    }

    /// Starts registering `plan`'s thresholds on the registrar's thread, with a cancellation
    /// flag of its own.
    private func startRegistrar(_ plan: ThresholdRegistrar.Plan) throws(SystemError) {
        let cancelled = Locked(false)
        registrarCancelled = cancelled
        try ThresholdRegistrar.start(plan, loop: loop, cancelled: cancelled) { [unowned self] delivery in
            // A delivery of a registrar cancelled since is dropped (a notification closes when dropped).
            guard !cancelled.withLock({ $0 }) else { return }
            if let change = delivered(delivery) { changed(change) }
        }
    }

    /// A threshold the registrar registered, or its end (loop thread).
    private func delivered(_ delivery: ThresholdRegistrar.Delivery) -> Change? {
        loop.preconditionOnLoop()
        switch delivery {
        case .registered(let notification):
            do {
                if let registration = try notification.register(on: loop, { [unowned self, unowned notification] events in fired(notification, events) }) {
                    watched.append((notification, registration))
                }
                return nil
            } catch {
                notification.tearDown()
                logger.warning("a usage threshold could not be watched; usage is still sampled", metadata: ["error": "\(error)"])
                return nil
            }
        case .finished(let count, let took, let gauges):
            pending = 0
            note = nil
            sampling.enterGuardedMode(for: gauges)
            logger.info(
                "memory monitor: usage thresholds registered; usage is now sampled only in the guard bands below the marks",
                metadata: ["thresholds": "\(count)", "took": "\(took)"])
            return .usageWatch(after: took)
        case .failed(let error, let registered):
            pending = 0
            note = "usage thresholds: \(registered) registered, then one failed (\(error)); usage is sampled continuously"
            logger.warning(
                "memory monitor: a usage threshold could not be registered; usage is sampled continuously instead",
                metadata: ["registered": "\(registered)", "error": "\(error)"])
            return .lines
        }
    }

    /// The limits a reading names.
    private static func limits(of snapshot: PressureSnapshot) -> [PlannedLimit] {
        snapshot.constraintsToWatch.map { PlannedLimit(cgroupPath: $0.cgroupPath, file: $0.limit.file, bytes: $0.limit.bytes) }
    }

    private static func describe(_ limits: [PlannedLimit]) -> String {
        limits.isEmpty ? "none" : limits.map(\.description).joined(separator: ", ")
    }

    /// Whether a reading names the limits the thresholds were planned for.
    private func namesThePlannedLimits(_ snapshot: PressureSnapshot) -> Bool {
        snapshot.constraintsToWatch.count == limits.count
            && zip(snapshot.constraintsToWatch, limits).allSatisfy { constraint, planned in
                constraint.limit.bytes == planned.bytes && constraint.limit.file == planned.file && constraint.cgroupPath == planned.cgroupPath
            }
    }
}

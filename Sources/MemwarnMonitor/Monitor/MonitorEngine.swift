import CgroupKit
import Logging
import MemwarnRelease
import MemwarnSystem

#if canImport(Glibc)
import Glibc
#endif

/// The monitor's working part, confined to its loop thread: it registers the sources a
/// ``SourcePlan`` makes, reads a snapshot when one fires, evaluates it, schedules what comes
/// next (step downs, re-checks, polls, retries), and tears the sources down.
final class MonitorEngine {
    let loop: EventLoop
    let sampler: SnapshotSampler
    private let configuration: MonitorConfiguration
    private var policy: PressurePolicy { configuration.policy }
    private let logger: Logger
    private let ledger: ReleaseLedger
    private let output: any MonitorEngineOutput
    /// Takes every reading on the release thread (the engine hands it over directly).
    private let releaseLoop: ReleaseLoop
    /// Set when a source failed for good (a deleted cgroup); ``PressureMonitor/run()`` throws it.
    private(set) var failure: CgroupError?

    private var evaluator: LevelEvaluator
    /// The level of the session this one replaces (a policy applied while running): the first
    /// reading is a change from it, or no event at all.
    private let carriedLevel: MemoryPressureLevel?
    private var growth: GrowthTracker
    /// The sources, with their registrations (`nil`: periodic, or no longer watched).
    private var sources: [(source: any PressureSource, registration: EventLoop.Registration?)] = []
    /// The usage sampler, when usage is sampled (continuously, or in guard bands on cgroup v1).
    private var usageSampling: UsageSampling?
    private var sampleDeadline: EventLoop.Deadline?
    /// The plan's lines (the sources made at start), the registered thresholds' lines, and a note
    /// on thresholds still being registered: with the sampler's, ``PressureMonitor/watchedSources``.
    private var planLines: [String] = []
    private var thresholdLines: [String] = []
    private var thresholdNote: String?
    private let samples: UsageSampleCount
    /// Set when the engine tears down or the thresholds are planned again: the threshold
    /// registrar under way then stops registering (each registrar has its own).
    private var registrarCancelled = Locked(false)
    /// cgroup v1 as root: usage thresholds still being registered (at start, or for a new limit).
    private(set) var pendingThresholds = 0
    /// cgroup v1 as root: the cgroup whose usage thresholds may be registered (`nil` elsewhere).
    private var thresholdCgroup: CgroupLocation?
    /// The limits the usage thresholds are planned for, nearest first: a full reading that names
    /// others has them planned again.
    private var thresholdLimits: [PlannedLimit] = []

    /// A limit as the thresholds were planned for it (a reading's constraint less its usage).
    private struct PlannedLimit: Equatable, CustomStringConvertible {
        var cgroupPath: String
        var file: String
        var bytes: UInt64
        var description: String { "\(cgroupPath)|\(file)=\(bytes)" }
    }
    /// The usage thresholds registered, among ``sources``.
    private var thresholdSources: Set<ObjectIdentifier> = []
    private var stepDown: (deadline: EventLoop.Deadline, source: PressureSignal)?
    private var recheckDeadline: EventLoop.Deadline?
    /// When the latest agent lease runs out unrenewed (``leaseGranted(isNew:endsAt:agentPid:)``).
    private var leaseDeadline: EventLoop.Deadline?
    /// When the backstop looks again at a coordinated limit's unanswered crossing (``AgentLeases``).
    private var backstopDeadline: EventLoop.Deadline?
    /// The coordinated limits the backstop counted again at the last reading (logged as they change).
    private var countedAgain: [String] = []
    /// The node agents holding leases, each watched for its end.
    private var agentWatches: [Int32: (watch: ProcessEndWatch, registration: EventLoop.Registration)] = [:]
    /// Agents whose end cannot be watched (pid 0: another pid namespace; no pidfds): their leases run out.
    private var unwatchableAgents: Set<Int32> = []
    /// While reads fail transiently: the retry's wait (doubling, at most a second), the
    /// strongest hint and its signal still to be evaluated, a source to drain again, whether a
    /// retry is scheduled, and the failures so far.
    private var transient: TransientRetry?

    private struct TransientRetry {
        var backoff = Duration.milliseconds(5)
        /// The strongest wake whose snapshot could not be read.
        var wake: (hint: MemoryPressureLevel, signal: PressureSignal)?
        /// A source whose own read failed.
        var source: (any PressureSource)?
        var scheduled = false
        var failures = 0
    }

    init(
        loop: EventLoop, sampler: SnapshotSampler, configuration: MonitorConfiguration, logger: Logger, ledger: ReleaseLedger,
        samples: UsageSampleCount, output: any MonitorEngineOutput, releaseLoop: ReleaseLoop, carriedLevel: MemoryPressureLevel? = nil
    ) {
        self.carriedLevel = carriedLevel
        self.loop = loop
        self.samples = samples
        self.sampler = sampler
        self.configuration = configuration
        self.logger = logger
        self.ledger = ledger
        self.output = output
        self.releaseLoop = releaseLoop
        evaluator = LevelEvaluator(policy: configuration.policy, countsPressureStall: configuration.watchesPressureStall, level: carriedLevel ?? .normal)
        growth = GrowthTracker(policy: configuration.policy)
    }

    /// How changes of usage reach the engine (known once it started).
    var usageWatch: MonitorArming.UsageWatch {
        guard let usageSampling, usageSampling.mode == .continuous else { return .thresholds }
        return usageSampling.rule.isAdaptive ? .adaptiveSampling : .polling
    }

    // MARK: Register

    /// Takes the first reading, registers every source, and emits the first event. Loop thread.
    ///
    /// - Throws: ``/CgroupKit/CgroupError`` when the cgroup cannot be read or a source cannot be made;
    ///   ``MonitorError`` when the loop cannot watch a source.
    func start() throws {
        loop.assertOnLoop()
        let snapshot = try sampler.sample()
        let plan: SourcePlan
        do {
            plan = try SourcePlan(
                sampler: sampler, snapshot: snapshot, policy: policy, environment: configuration.environment,
                watchesPressureStall: configuration.watchesPressureStall, logger: logger)
        } catch let error as SystemError {
            throw MonitorError(error)
        }
        usageSampling = plan.usageSampling
        var periods: [Duration: [any PressureSource]] = [:]
        for source in plan.sources {
            do {
                let registration = try source.register(on: loop) { [unowned self, unowned source] fired in drain(source, fired) }
                sources.append((source, registration))
            } catch {
                sources.append((source, nil))
                throw MonitorError(error)
            }
            if let period = source.period { periods[period, default: []].append(source) }
        }
        for (period, group) in periods { schedulePoll(group, every: period) }
        planLines = plan.lines
        thresholdCgroup = plan.thresholdCgroup
        thresholdLimits = Self.plannedLimits(of: snapshot)
        if let pending = plan.pendingThresholds {
            pendingThresholds = pending.requests.count
            thresholdNote = "usage thresholds: \(pending.requests.count) being registered (the kernel takes an RCU grace period for each)"
            do {
                try startRegistrar(pending)
            } catch {
                throw MonitorError(error)
            }
        }
        publishLines()
        // Emitted once every source is live, so an observer of the first event misses nothing.
        let forecast = growth.observe(snapshot, ledgerBefore: ledger.current, ledgerAfter: ledger.current)
        _ = evaluator.evaluate(snapshot, hint: .normal, now: .now)
        resample(after: snapshot)  // first: the reading carries the sampler's wait as its detection bound
        if let failure { throw failure }  // the sampler could not open a limit's usage file
        if let carried = carriedLevel {
            // A policy applied while running: the level carries over (its hold time too), and the
            // first reading at the new marks is an event only when it changes the level.
            let event = LevelEvent(level: evaluator.level, previous: carried, source: .policyChange, snapshot: snapshot, forecast: forecast)
            if evaluator.level != carried { output.engineEmitted(event) }
            hand(reading(event, rise: evaluator.level > carried ? evaluator.level : nil))
        } else {
            let event = LevelEvent(level: evaluator.level, previous: nil, source: .initial, snapshot: snapshot, forecast: forecast)
            output.engineEmitted(event)
            hand(reading(event, rise: nil))
        }
        scheduleRecheckIfRaised()
    }

    /// What a source that fired says, acted on.
    private func drain(_ source: any PressureSource, _ fired: EpollEvents) {
        loop.assertOnLoop()
        guard failure == nil else { return }
        switch source.drain(fired) {
        case .quiet:
            return
        case .wake(let hint, let signal, let followUp):
            follow(followUp, of: source)
            wake(hint: hint, source: signal)
        case .gone(let reason):
            stopWatching(source)
            logger.warning("\(reason)")
        case .failed(let error):
            fail(error)
        case .retry(let error):
            retry(after: error, wake: nil, source: source)
        }
    }

    private func follow(_ followUp: PressureSourceFollowUp, of source: any PressureSource) {
        guard let index = sources.firstIndex(where: { $0.source === source }), let registration = sources[index].registration else { return }
        switch followUp {
        case .keepWatching:
            return
        case .stopWatching:
            stopWatching(source)
        case .pause(let quiet):
            do {
                try loop.rewatch(registration, for: .none)
                loop.schedule(at: .now + quiet) { [unowned self] in
                    do {
                        try loop.rewatch(registration, for: .readable)
                    } catch {
                        logger.warning("a paused source could not be watched again", metadata: ["source": "\(source.description)", "error": "\(error)"])
                    }
                }
            } catch {
                // Not paused: it goes on firing, which costs readings, not correctness.
                logger.debug("a flooding source could not be paused", metadata: ["source": "\(source.description)", "error": "\(error)"])
            }
        }
    }

    /// Starts registering `plan`'s thresholds on the registrar's thread, with a cancellation
    /// flag of its own.
    private func startRegistrar(_ plan: ThresholdRegistrar.Plan) throws(SystemError) {
        let cancelled = Locked(false)
        registrarCancelled = cancelled
        try ThresholdRegistrar.start(plan, loop: loop, cancelled: cancelled) { [unowned self] delivery in
            // A delivery of a registrar cancelled since is dropped (a notification closes when dropped).
            guard !cancelled.withLock({ $0 }) else { return }
            thresholdsDelivered(delivery)
        }
    }

    /// The limits a reading names.
    private static func plannedLimits(of snapshot: PressureSnapshot) -> [PlannedLimit] {
        snapshot.limitsWatched.map { PlannedLimit(cgroupPath: $0.cgroupPath, file: $0.limit.file, bytes: $0.limit.bytes) }
    }

    /// Whether a reading names the limits the thresholds were planned for. Every full reading
    /// asks, on the loop thread: a comparison in place, nothing made.
    private func namesThePlannedLimits(_ snapshot: PressureSnapshot) -> Bool {
        snapshot.limitsWatched.count == thresholdLimits.count
            && zip(snapshot.limitsWatched, thresholdLimits).allSatisfy { constraint, planned in
                constraint.limit.bytes == planned.bytes && constraint.limit.file == planned.file && constraint.cgroupPath == planned.cgroupPath
            }
    }

    /// cgroup v1 as root: when a reading names other limits than the thresholds were planned for
    /// (a limit lowered or raised at run time, one set where there was none, an ancestor's
    /// appeared or went), the thresholds of the old limits are unregistered, usage is sampled
    /// continuously again, and the new limits' thresholds are registered behind it. Without this
    /// the thresholds stayed in bytes of the starting limit: a cut from 1 GiB to 100 MiB left
    /// usage at 85 % of the new limit unreported.
    private func replanThresholdsIfTheLimitsChanged(_ snapshot: PressureSnapshot) {
        guard let cgroup = thresholdCgroup, let usageSampling else { return }
        guard !namesThePlannedLimits(snapshot) else { return }
        let before = thresholdLimits
        let limits = Self.plannedLimits(of: snapshot)
        thresholdLimits = limits
        registrarCancelled.withLock { $0 = true }
        for index in sources.indices.reversed() where thresholdSources.contains(ObjectIdentifier(sources[index].source)) {
            if let registration = sources[index].registration { loop.unwatch(registration) }
            sources[index].source.tearDown()
            sources.remove(at: index)
        }
        thresholdSources = []
        thresholdLines = []
        usageSampling.leaveGuardedMode()
        let requests = SourcePlan.thresholdRequests(for: snapshot.limitsWatched, of: cgroup, sampling: usageSampling, policy: policy)
        func describe(_ limits: [PlannedLimit]) -> String {
            limits.isEmpty ? "none" : limits.map(\.description).joined(separator: ", ")
        }
        logger.notice(
            "memory monitor: a limit changed; the usage thresholds are planned again",
            metadata: [
                "before": "\(describe(before))", "after": "\(describe(limits))", "thresholds": "\(requests.count)",
            ])
        pendingThresholds = requests.count
        if requests.isEmpty {
            thresholdNote = nil
            usageSampling.reason = "no cgroup limit"
        } else {
            thresholdNote = "usage thresholds: \(requests.count) being registered for the new limit (the kernel takes an RCU grace period for each)"
            usageSampling.reason = "until the usage thresholds for the new limit are registered, then only in the guard bands below the marks"
            do {
                try startRegistrar(ThresholdRegistrar.Plan(files: sampler.files, requests: requests))
            } catch {
                pendingThresholds = 0
                thresholdNote = "usage thresholds: none registered for the new limit (\(error)); usage is sampled continuously"
                logger.warning(
                    "memory monitor: the usage thresholds for a new limit could not be registered; usage is sampled continuously instead",
                    metadata: ["error": "\(error)"])
            }
        }
        output.engineWatchesUsage(by: usageWatch, after: .zero)
        publishLines()
    }

    /// A threshold the registrar registered, or its end (loop thread).
    private func thresholdsDelivered(_ delivery: ThresholdRegistrar.Delivery) {
        loop.assertOnLoop()
        guard failure == nil else { return }
        switch delivery {
        case .registered(let notification):
            do {
                let registration = try notification.register(on: loop) { [unowned self, unowned notification] fired in drain(notification, fired) }
                sources.append((notification, registration))
                thresholdSources.insert(ObjectIdentifier(notification))
                thresholdLines.append(notification.description)
            } catch {
                notification.tearDown()
                logger.warning("a usage threshold could not be watched; usage is still sampled", metadata: ["error": "\(error)"])
            }
        case .finished(let count, let took, let gauges):
            pendingThresholds = 0
            thresholdNote = nil
            usageSampling?.enterGuardedMode(for: gauges)
            publishLines()
            output.engineWatchesUsage(by: usageWatch, after: took)
            logger.info(
                "memory monitor: usage thresholds registered; usage is now sampled only in the guard bands below the marks",
                metadata: ["thresholds": "\(count)", "took": "\(took)"])
            resample(after: nil)
        case .failed(let error, let registered):
            pendingThresholds = 0
            thresholdNote = "usage thresholds: \(registered) registered, then one failed (\(error)); usage is sampled continuously"
            publishLines()
            logger.warning(
                "memory monitor: a usage threshold could not be registered; usage is sampled continuously instead",
                metadata: ["registered": "\(registered)", "error": "\(error)"])
        }
    }

    /// What the monitor listens to, to ``PressureMonitor/watchedSources``.
    private func publishLines() {
        output.engineListens(to: (usageSampling.map { [$0.description] } ?? []) + planLines + thresholdLines + (thresholdNote.map { [$0] } ?? []))
    }

    private func stopWatching(_ source: any PressureSource) {
        guard let index = sources.firstIndex(where: { $0.source === source }), let registration = sources[index].registration else { return }
        loop.unwatch(registration)
        sources[index].registration = nil
    }

    // MARK: Evaluate

    /// Reads a snapshot and evaluates it with `hint` from `source`.
    func wake(hint: MemoryPressureLevel, source: PressureSignal) {
        loop.assertOnLoop()
        guard failure == nil else { return }
        let ledgerBefore = ledger.current
        let snapshot: PressureSnapshot
        do {
            snapshot = try sampler.sample()
        } catch  where error.isTransient {
            retry(after: error, wake: (hint, source), source: nil)
            return
        } catch {
            fail(error)
            return
        }
        let forecast = growth.observe(snapshot, ledgerBefore: ledgerBefore, ledgerAfter: ledger.current)
        var hint = hint
        var source = source
        // The forecast raises .warning only where nothing else already asks for it.
        if LevelEvaluator.candidate(
            for: snapshot, current: evaluator.level, hint: hint, policy: policy,
            countsPressureStall: evaluator.countsPressureStall) < .warning,
            ForecastRule.warns(forecast, snapshot: snapshot, policy: policy)
        {
            hint = .warning
            source = .forecast
        }
        evaluate(snapshot, hint: hint, source: source, forecast: forecast)
        // Last: the evaluation re-plans sampling from this reading, which may read a new limit's
        // usage file and fail too (then the episode goes on, its retry owing that read).
        endTransientEpisode()
    }

    private func evaluate(_ snapshot: PressureSnapshot, hint: MemoryPressureLevel, source: PressureSignal, forecast: PressureForecast?) {
        resample(after: snapshot)  // first: the reading carries the sampler's wait as its detection bound
        guard failure == nil else { return }
        let previous = evaluator.level
        let outcome = evaluator.evaluate(snapshot, hint: hint, now: .now)
        var rise: MemoryPressureLevel?
        if let change = outcome.change {
            // A step down is caused by the signal that first saw the lower level.
            let cause = change < previous ? (stepDown?.source ?? source) : source
            cancelStepDown()
            if change > previous {
                rise = change
                if cause == .forecast { growth.noteForecastWarning(snapshot, forecast: forecast, releasedBytes: ledger.current.releasedBytes) }
            }
            let event = LevelEvent(level: change, previous: previous, source: cause, snapshot: snapshot, forecast: forecast)
            output.engineEmitted(event)
            hand(reading(event, rise: rise))
        } else if let at = outcome.stepDownAt {
            scheduleStepDown(at: at, source: source)
        } else {
            cancelStepDown()  // the level stands again: a pending step down is void
        }
        if rise == nil && outcome.change == nil {
            let event = LevelEvent(level: evaluator.level, previous: evaluator.level, source: source, snapshot: snapshot, forecast: forecast)
            hand(reading(event, rise: nil))
        }
        scheduleRecheckIfRaised()
        scheduleBackstopCheck()
    }

    /// A reading when a coordinated limit's crossing would go unanswered for
    /// ``AgentLeases/answerBound`` (it then counts again), and a line when the limits counted
    /// again change.
    private func scheduleBackstopCheck() {
        // Every evaluation asks: without a lease, and nothing left from one, it costs one load.
        guard let leases = sampler.leases, !(leases.isEmpty && countedAgain.isEmpty && backstopDeadline == nil) else { return }
        if let pending = backstopDeadline { loop.cancel(pending) }
        backstopDeadline = nil
        let counted = leases.countedAgain
        if counted != countedAgain {
            if counted.isEmpty {
                logger.notice("memory monitor: the coordinated limits are left to the node agent again", metadata: ["cgroups": "\(countedAgain)"])
            } else {
                logger.warning(
                    "memory monitor: a coordinated limit counts again: the node agent did not answer its crossing in time, or it reached the critical mark",
                    metadata: ["cgroups": "\(counted)", "answerBound": "\(AgentLeases.answerBound)"])
            }
            countedAgain = counted
        }
        guard let at = leases.nextBackstopCheck() else { return }
        backstopDeadline = loop.schedule(at: at + .milliseconds(1)) { [unowned self] in
            backstopDeadline = nil
            wake(hint: .normal, source: .agentLease)
        }
    }

    /// Every reading goes to the monitor (metrics, the latest figures) and to the release loop,
    /// which returns at once from most.
    private func hand(_ reading: MonitorReading) {
        output.engineRead(reading)
        releaseLoop.offer(reading)
    }

    private func reading(_ event: LevelEvent, rise: MemoryPressureLevel?) -> MonitorReading {
        MonitorReading(
            event: event, rise: rise, growthBytesPerSecond: growth.bytesPerSecond, tally: growth.tally, readAt: .now,
            detectionBound: detectionBound)
    }

    /// How long the next detection of a usage change can take: the sampler's wait where usage is
    /// sampled continuously, else the kernel's event latency.
    private var detectionBound: Duration {
        guard let usageSampling, usageSampling.mode == .continuous else { return MonitorReading.eventDrivenDetection }
        return usageSampling.currentInterval
    }

    // MARK: Schedule

    private func scheduleStepDown(at instant: ContinuousClock.Instant, source: PressureSignal) {
        guard stepDown == nil else { return }
        let deadline = loop.schedule(at: instant) { [unowned self] in
            let cause = stepDown?.source ?? source
            wake(hint: .normal, source: cause)
        }
        stepDown = (deadline, source)
    }

    private func cancelStepDown() {
        if let pending = stepDown { loop.cancel(pending.deadline) }
        stepDown = nil
    }

    /// Re-reads every recheck interval while the level is raised, to find the way down. At
    /// `.normal` nothing is scheduled here (usage sampling, where there is some, schedules itself).
    private func scheduleRecheckIfRaised() {
        if let deadline = recheckDeadline { loop.cancel(deadline) }
        recheckDeadline = nil
        guard evaluator.level > .normal, stepDown == nil else { return }
        recheckDeadline = loop.schedule(at: .now + policy.recheckInterval) { [unowned self] in
            recheckDeadline = nil
            wake(hint: .normal, source: .recheck)
        }
    }

    /// Hands a full reading (if any) to the usage sampler and schedules its next read.
    private func resample(after snapshot: PressureSnapshot?) {
        guard let usageSampling else { return }
        let now = ContinuousClock.now
        if let snapshot {
            replanThresholdsIfTheLimitsChanged(snapshot)
            do {
                if try usageSampling.observe(snapshot, at: now) { publishLines() }
            } catch  where error.isTransient {
                retry(after: error, wake: (.normal, .poll), source: nil)
            } catch {
                fail(error)
                return
            }
        }
        scheduleSample(after: now)
    }

    /// A node agent began or renewed coordinating an ancestor's limit (``AgentLeases``): read
    /// now when it is new (the limit is left out from now on), and again the moment the lease
    /// would run out unrenewed (the limit counts again).
    func leaseGranted(isNew: Bool, endsAt end: ContinuousClock.Instant, agentPid: Int32) {
        loop.assertOnLoop()
        guard failure == nil else { return }
        if agentWatches[agentPid] == nil && !unwatchableAgents.contains(agentPid) { watchAgent(agentPid) }
        scheduleLeaseEnd()
        if isNew { wake(hint: .normal, source: .agentLease) }
    }

    /// A reading the moment the earliest lease still held would run out unrenewed (every agent's,
    /// not only the one just renewed).
    private func scheduleLeaseEnd() {
        if let pending = leaseDeadline { loop.cancel(pending) }
        leaseDeadline = nil
        guard let earliest = sampler.leases?.current().values.map(\.until).min() else { return }
        leaseDeadline = loop.schedule(at: earliest + .milliseconds(1)) { [unowned self] in
            leaseDeadline = nil
            wake(hint: .normal, source: .agentLease)
            scheduleLeaseEnd()
        }
    }

    /// Watches an agent's end through a pidfd: when it dies, its leases end at once. Where the
    /// pidfd cannot be had (another pid namespace, an old kernel) the leases run out by themselves.
    private func watchAgent(_ pid: Int32) {
        do {
            let watch = try ProcessEndWatch(pid: pid)
            let registration = try loop.watch(watch.descriptor, for: .readable) { [unowned self] _ in agentEnded(pid) }
            agentWatches[pid] = (watch, registration)
        } catch  where error.errno == ESRCH {
            loop.schedule(at: .now) { [unowned self] in agentEnded(pid) }  // gone already
        } catch {
            unwatchableAgents.insert(pid)  // not tried again at every renewal
            logger.debug("a node agent's end cannot be watched; its leases run out by themselves", metadata: ["agent": "\(pid)", "error": "\(error)"])
        }
    }

    /// An agent ended: its leases end, and the limits it coordinated count again.
    private func agentEnded(_ pid: Int32) {
        loop.assertOnLoop()
        if let watch = agentWatches.removeValue(forKey: pid) { loop.unwatch(watch.registration) }
        let ended = sampler.leases?.revokeAll(agentPid: pid) ?? []
        guard failure == nil, !ended.isEmpty else { return }
        logger.notice("memory monitor: the node agent ended; the limits it coordinated count again", metadata: ["agent": "\(pid)", "cgroups": "\(ended)"])
        scheduleLeaseEnd()
        wake(hint: .normal, source: .agentLease)
    }

    /// A lease ended at the agent's word (it stops): read now, the limit counts again.
    func leaseRevoked() {
        loop.assertOnLoop()
        guard failure == nil else { return }
        scheduleLeaseEnd()
        wake(hint: .normal, source: .agentLease)
    }

    /// Schedules the sampler's next read (none when it asks for none: a guarded sampler outside
    /// its bands).
    private func scheduleSample(after now: ContinuousClock.Instant) {
        guard let usageSampling else { return }
        if let pending = sampleDeadline { loop.cancel(pending) }
        sampleDeadline = nil
        guard let at = usageSampling.nextRead(after: now) else { return }
        sampleDeadline = loop.schedule(at: at, sampleAction)
    }

    /// The sampler's deadline action, made once: scheduled up to 200 times a second, it should
    /// not allocate a closure each time.
    private lazy var sampleAction: () -> Void = { [unowned self] in
        sampleDeadline = nil
        sampleUsage()
    }

    /// One cheap read of usage: a crossing (or a due full reading) wakes the monitor, which
    /// reschedules after its full reading; otherwise the next read is scheduled from this one.
    private func sampleUsage() {
        guard failure == nil, let usageSampling else { return }
        let now = ContinuousClock.now
        switch usageSampling.sample(at: now) {
        case .wake(let hint, let signal, _):
            samples.add()
            endTransientEpisode()
            wake(hint: hint, source: signal)
            if sampleDeadline == nil { scheduleSample(after: .now) }  // the full reading failed transiently
        case .quiet, .gone:
            samples.add()
            endTransientEpisode()
            scheduleSample(after: now)
        case .failed(let error):
            fail(error)
        case .retry(let error):
            retry(after: error, wake: nil, source: nil)
            scheduleSample(after: now)
        }
    }

    /// Reads succeed again: a transient episode, if one was under way, is over — unless its retry
    /// still owes a read that failed (a source to drain again, a wake whose reading failed): a read
    /// of another file succeeding does not do that one's work, so the episode lasts until the
    /// retry does it. (Ending it here dropped the retry: a `memory.events` change whose read failed
    /// once was never seen, a crossing whose full reading failed waited for the next poll.)
    private func endTransientEpisode() {
        guard failure == nil, let episode = transient, episode.wake == nil, episode.source == nil else { return }
        transient = nil
        logger.notice("memory monitor reads again after transient errors", metadata: ["failures": "\(episode.failures)"])
        output.engineNoted(transientError: nil)
    }

    /// Drains the periodic sources of one period together, every period, and wakes the monitor
    /// once with the strongest hint: the documented fallback where the kernel offers no event.
    private func schedulePoll(_ group: [any PressureSource], every period: Duration) {
        loop.schedule(at: .now + period) { [unowned self] in
            guard failure == nil else { return }
            var strongest: (hint: MemoryPressureLevel, signal: PressureSignal)?
            for source in group {
                switch source.drain([]) {
                case .wake(let hint, let signal, _):
                    if hint >= strongest?.hint ?? .normal { strongest = (hint, signal) }
                case .failed(let error):
                    fail(error)
                    return
                case .quiet, .gone, .retry:
                    continue
                }
            }
            if let strongest { wake(hint: strongest.hint, source: strongest.signal) }
            schedulePoll(group, every: period)
        }
    }

    /// A read failed transiently (out of descriptors or memory, interrupted): keep every
    /// source, say so once, and read again after a wait that doubles up to a second, with the
    /// strongest hint seen meanwhile (and a source whose own read failed drained again). The
    /// monitor never stops for this.
    private func retry(after error: CgroupError, wake: (hint: MemoryPressureLevel, signal: PressureSignal)?, source: (any PressureSource)?) {
        var state = transient ?? TransientRetry()
        if transient == nil {
            logger.warning("memory monitor: a read failed transiently; it keeps its sources and retries", metadata: ["error": "\(error)"])
        }
        state.failures += 1
        if let wake, wake.hint >= state.wake?.hint ?? .normal { state.wake = wake }
        if let source { state.source = source }
        output.engineNoted(transientError: error)
        guard !state.scheduled else {
            transient = state
            return
        }
        state.backoff = min(state.backoff * 2, .seconds(1))
        state.scheduled = true
        transient = state
        loop.schedule(at: .now + state.backoff) { [unowned self] in
            guard failure == nil, var pending = transient else { return }
            let (source, wake) = (pending.source, pending.wake)
            (pending.scheduled, pending.source, pending.wake) = (false, nil, nil)
            transient = pending
            if let source { drain(source, []) }
            if let wake { self.wake(hint: wake.hint, source: wake.signal) }
        }
    }

    private func fail(_ error: CgroupError) {
        guard failure == nil else { return }
        failure = error
        logger.error("memory monitor stopped", metadata: ["error": "\(error)"])
        loop.stop()
    }

    // MARK: Tear down

    /// Unwatches and closes every source. Loop thread, after the loop ended.
    func tearDown() {
        loop.assertOnLoop()
        registrarCancelled.withLock { $0 = true }
        for (source, registration) in sources {
            if let registration { loop.unwatch(registration) }
            source.tearDown()
        }
        sources = []
        for (_, watch) in agentWatches { loop.unwatch(watch.registration) }
        agentWatches = [:]
    }
}

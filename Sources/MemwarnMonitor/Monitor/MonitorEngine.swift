package import CgroupKit
import Logging
package import MemwarnRelease
package import MemwarnSystem

/// The monitor's working part, confined to its loop thread. It routes: the sources a
/// ``SourcePlan`` makes fire, it takes one reading, the ``LevelMachine`` decides it, and the
/// reading goes out with its decision (to the monitor, and to the release loop, which acts on
/// it). What comes next is scheduled from the decision (a step down's end, a recheck), the usage
/// sampler (its next read), the ``ThresholdPlanner`` (cgroup v1 as root), the ``LeaseTimers``
/// (a node agent's leases) and the ``TransientRetry``.
package final class MonitorEngine {
    /// Where the engine is: its state is one of these, not a set of flags.
    private enum Phase {
        /// Made, not started: no source registered.
        case idle
        /// Sources registered; readings flow.
        case running
        /// A source failed for good (a deleted cgroup): nothing is read again.
        case failed(CgroupError)
        /// Torn down after its loop ended.
        case tornDown
    }

    package let loop: EventLoop
    let sampler: SnapshotSampler
    private let configuration: MonitorConfiguration
    private var policy: PressurePolicy { configuration.policy }
    private let logger: Logger
    private let ledger: ReleaseLedger
    let output: any MonitorEngineOutput
    /// Takes every decided reading off the loop: a service's release loop, a node agent's rounds.
    private let consumer: any MonitorReadingConsumer
    let samples: UsageSampleCount
    private var phase = Phase.idle

    private var machine: LevelMachine
    /// The level of the session this one replaces (a policy applied while running): the first
    /// reading is a change from it, or no event at all.
    private let carriedLevel: MemoryPressureLevel?
    private var growth: GrowthTracker
    /// The sources the plan made, registered.
    private let watched: WatchedSources
    /// The plan's lines (the sources made at start): with the sampler's and the thresholds',
    /// `watchedSources`.
    private var planLines: [String] = []
    /// The usage sampler, when usage is sampled (continuously, or in guard bands on cgroup v1).
    private(set) var usageSampling: UsageSampling?
    var sampleDeadline: EventLoop.Deadline?
    /// The sampler's deadline action, made once: scheduled up to 200 times a second, it should
    /// not allocate a closure each time.
    private(set) lazy var sampleAction: () -> Void = { [unowned self] in
        sampleDeadline = nil
        sampleUsage()
    }
    /// The reading the level asks for next (a step down's end, a recheck), scheduled.
    var levelDeadline: (deadline: EventLoop.Deadline, reading: LevelMachine.NextReading)?
    /// cgroup v1 as root: the usage thresholds.
    private(set) var thresholds: ThresholdPlanner?
    /// A node agent's leases, when the sampler has them.
    private(set) var leaseTimers: LeaseTimers?
    private(set) lazy var transient = TransientRetry(
        loop: loop, logger: logger, noted: { [unowned self] in output.engineNoted(transientError: $0) },
        redo: { [unowned self] source, wake in
            if let source { drain(source, []) }
            if let wake { self.wake(hint: wake.hint, source: wake.signal) }
        })

    init(
        loop: EventLoop, sampler: SnapshotSampler, configuration: MonitorConfiguration, logger: Logger, ledger: ReleaseLedger,
        samples: UsageSampleCount, decisions: SharedCount? = nil, output: any MonitorEngineOutput, consumer: any MonitorReadingConsumer,
        carriedLevel: MemoryPressureLevel? = nil
    ) {
        self.carriedLevel = carriedLevel
        self.loop = loop
        self.samples = samples
        self.sampler = sampler
        self.configuration = configuration
        self.logger = logger
        self.ledger = ledger
        self.output = output
        self.consumer = consumer
        watched = WatchedSources(loop: loop, logger: logger)
        machine = LevelMachine(
            policy: configuration.policy, countsPressureStall: configuration.watchesPressureStall, level: carriedLevel ?? .normal, decisions: decisions)
        growth = GrowthTracker(policy: configuration.policy)
    }

    /// Set when a source failed for good (a deleted cgroup); ``PressureMonitor/run()`` throws it.
    package var failure: CgroupError? {
        if case .failed(let error) = phase { return error }
        return nil
    }

    var isRunning: Bool {
        if case .running = phase { return true }
        return false
    }

    /// cgroup v1 as root: usage thresholds still being registered (at start, or for a new limit).
    package var pendingThresholds: Int { thresholds?.pending ?? 0 }

    /// How changes of usage reach the engine (known once it started).
    package var usageWatch: MonitorArming.UsageWatch {
        guard let usageSampling, usageSampling.mode == .continuous else { return .thresholds }
        return usageSampling.rule.isAdaptive ? .adaptiveSampling : .polling
    }

    // MARK: Start

    /// Takes the first reading, registers every source, and emits the first event. Loop thread.
    ///
    /// - Throws: `CgroupError` when the cgroup cannot be read or a source cannot be made;
    ///   ``MonitorError`` when the loop cannot watch a source.
    package func start() throws {
        loop.preconditionOnLoop()
        let now = loop.now
        let snapshot = try sampler.sample()
        let plan: SourcePlan
        do {
            plan = try SourcePlan(
                sampler: sampler, snapshot: snapshot, policy: policy, environment: configuration.environment,
                watchesPressureStall: configuration.watchesPressureStall, logger: logger)
        } catch let error as SystemError {
            throw MonitorError(error)
        }
        phase = .running
        usageSampling = plan.usageSampling
        do {
            try watched.register(plan.sources, fired: { [unowned self] in drain($0, $1) }, drainPeriodic: { [unowned self] in drainPeriodic($0) })
        } catch {
            throw MonitorError(error)
        }
        planLines = plan.lines
        if let cgroup = plan.thresholdCgroup, let usageSampling {
            let planner = ThresholdPlanner(
                cgroup: cgroup, sampling: usageSampling, loop: loop, files: sampler.files, policy: policy, logger: logger, plannedFor: snapshot,
                fired: { [unowned self] notification, events in drain(notification, events) }, changed: { [unowned self] in thresholdsChanged($0) })
            thresholds = planner
            if let pending = plan.pendingThresholds {
                do {
                    try planner.start(pending)
                } catch {
                    throw MonitorError(error)
                }
            }
        }
        if let leases = sampler.leases {
            leaseTimers = LeaseTimers(leases: leases, loop: loop, logger: logger) { [unowned self] in
                wake(hint: .readNow, source: .agentLease)
            }
        }
        publishLines()
        // Emitted once every source is live, so an observer of the first event misses nothing.
        let forecast = growth.observe(snapshot, ledgerBefore: ledger.current, ledgerAfter: ledger.current, now: now)
        let decision = machine.start(snapshot, carried: carriedLevel, now: now)
        resample(after: snapshot, now: now)  // first: the reading carries the sampler's wait as its detection bound
        if let failure { throw failure }  // the sampler could not open a limit's usage file
        route(decision, snapshot: snapshot, forecast: forecast, readAt: now)
    }

    // MARK: Sources

    /// What a source that fired says, acted on.
    private func drain(_ source: any PressureSource, _ fired: EpollEvents) {
        loop.preconditionOnLoop()
        guard isRunning else { return }
        switch source.drain(fired) {
        case .quiet:
            return
        case .wake(let hint, let signal, let followUp):
            watched.watch(source, as: followUp)
            thresholds?.watch(source, as: followUp)
            wake(hint: hint, source: signal)
        case .gone(let reason):
            watched.stopWatching(source)
            logger.warning("\(reason)")
        case .failed(let error):
            fail(error)
        case .retry(let error):
            transient.failed(error, owing: nil, source: source)
        }
    }

    /// Drains the periodic sources of one period together and wakes the monitor once with the
    /// strongest hint: the documented fallback where the kernel offers no event.
    ///
    /// - Returns: whether to poll them again.
    private func drainPeriodic(_ group: [any PressureSource]) -> Bool {
        guard isRunning else { return false }
        var strongest: (hint: WakeHint, signal: PressureSignal)?
        for source in group {
            switch source.drain([]) {
            case .wake(let hint, let signal, _):
                if hint >= strongest?.hint ?? .readNow { strongest = (hint, signal) }
            case .failed(let error):
                fail(error)
                return false
            case .quiet, .gone, .retry:
                continue
            }
        }
        if let strongest { wake(hint: strongest.hint, source: strongest.signal) }
        return true
    }

    /// The thresholds changed what the monitor listens to, or how it watches usage.
    private func thresholdsChanged(_ change: ThresholdPlanner.Change) {
        guard isRunning else { return }
        publishLines()
        guard case .usageWatch(let took) = change else { return }
        output.engineWatchesUsage(by: usageWatch, after: took)
        scheduleSample(after: loop.now)
    }

    /// What the monitor listens to, to `watchedSources`.
    func publishLines() {
        output.engineListens(to: (usageSampling.map { [$0.description] } ?? []) + planLines + (thresholds?.lines ?? []))
    }

    // MARK: Reading

    /// Takes one reading, has it decided, and routes the decision: `hint` is what the waking
    /// signal (`source`) itself says (``WakeHint/readNow``: only "take a reading now").
    package func wake(hint: WakeHint, source: PressureSignal) {
        loop.preconditionOnLoop()
        guard isRunning else { return }
        let ledgerBefore = ledger.current
        // The reading's time is when its read began: a read that began before a release ended
        // may hold the numbers from before it (the release loop's staleness test).
        let readBegan = loop.now
        let snapshot: PressureSnapshot
        do {
            snapshot = try sampler.sample()
        } catch  where error.isTransient {
            transient.failed(error, owing: (hint, source), source: nil)
            return
        } catch {
            fail(error)
            return
        }
        let now = loop.now
        let forecast = growth.observe(snapshot, ledgerBefore: ledgerBefore, ledgerAfter: ledger.current, now: now)
        let decision = machine.step(snapshot, hint: hint.level, source: source, forecast: forecast, now: now)
        if decision.forecastRaised { growth.noteForecastWarning(snapshot, forecast: forecast, releasedBytes: ledger.current.releasedBytes, now: now) }
        resample(after: snapshot, now: now)  // first: the reading carries the sampler's wait as its detection bound
        guard isRunning else { return }
        route(decision, snapshot: snapshot, forecast: forecast, readAt: readBegan)
        // Last: the sampling re-planned from this reading may have read a new limit's usage file
        // and failed too (then the episode goes on, its retry owing that read).
        transient.succeeded()
    }

    /// A decided reading goes out: its event to observers when the level changed (and always for
    /// a monitor's first reading), the reading to the monitor (metrics, the latest figures) and to
    /// its consumer (the release loop, which returns at once from most), and the level's next
    /// reading scheduled.
    /// `readAt` is when the reading's read began.
    private func route(_ decision: LevelMachine.Decision, snapshot: PressureSnapshot, forecast: PressureForecast?, readAt: ContinuousClock.Instant) {
        let event = LevelEvent(level: decision.level, previous: decision.previous, source: decision.cause, snapshot: snapshot, forecast: forecast)
        if decision.previous == nil || decision.level != decision.previous { output.engineEmitted(event) }
        let reading = MonitorReading(
            event: event, rise: decision.rise, releaseLevel: decision.releaseLevel, growthBytesPerSecond: growth.bytesPerSecond,
            tally: growth.tally, readAt: readAt, detectionBound: detectionBound)
        output.engineRead(reading)
        consumer.offer(reading)
        scheduleLevelReading(decision.nextReading)
        leaseTimers?.afterReading()
    }

    /// How long the next detection of a usage change can take: the sampler's wait where usage is
    /// sampled continuously, else the kernel's event latency.
    private var detectionBound: Duration {
        guard let usageSampling, usageSampling.mode == .continuous else { return MonitorReading.eventDrivenDetection }
        return usageSampling.currentInterval
    }

    // MARK: End

    func fail(_ error: CgroupError) {
        guard isRunning else { return }
        phase = .failed(error)
        thresholds?.tearDown()  // a registrar under way stops, and what it delivers now is dropped
        logger.error("memory monitor stopped", metadata: ["error": "\(error)"])
        loop.stop()
    }

    /// Unwatches and closes every source. Loop thread, after the loop ended.
    package func tearDown() {
        loop.preconditionOnLoop()
        thresholds?.tearDown()
        watched.tearDown()
        leaseTimers?.tearDown()
        if failure == nil { phase = .tornDown }  // a failure stays: the session throws it
    }
}

import CLibcgroup
import CgroupKit
import Logging
#if canImport(Glibc)
import Glibc
#endif

/// The monitor's working part, confined to its loop thread: it owns the event sources,
/// takes snapshots when one fires, runs the evaluator and hands out level events.
final class MonitorEngine {
    let loop: EventLoop
    let sampler: SnapshotSampler
    private let configuration: MonitorConfiguration
    private var policy: PressurePolicy { configuration.policy }
    private let logger: Logger
    private let emit: (LevelEvent) -> Void
    private let read: (MonitorReading) -> Void
    private let describeSources: ([String]) -> Void
    private let transientError: (CgroupError?) -> Void
    private let ledger: ReleaseLedger
    /// Set when a source failed for good (a deleted cgroup); ``PressureMonitor/run()`` throws it.
    private(set) var failure: CgroupError?

    private var evaluator: LevelEvaluator
    private var notifications: [CgroupV1Notification] = []
    private var triggers: [PressureTrigger] = []
    private var pressureSamplers: [PressureSampler] = []
    private var fileWatches: [FileModifyWatch] = []
    private var systemdWatch: SystemdPressureWatch?
    private var lastEvents: MemoryEventCounters?
    private var pollsUsage = false
    private var stepDown: (deadline: Int, source: PressureSignal)?
    private var recheckDeadline: Int?
    private var lastRatio = 0.0
    private var sourceNames: [String] = []
    private var growth: GrowthEstimator
    private var lastCapacity: UInt64?
    private var tally = ForecastTally()
    /// A forecast warning waiting to be confirmed: the ledger's bytes when it was raised, and
    /// its deadline (monotonic seconds).
    private var pendingForecast: (releasedBytes: UInt64, deadline: Double)?
    /// While reads fail transiently: the retry's wait (doubling, at most a second), the
    /// strongest hint and its source still to be evaluated, and whether a retry is scheduled.
    private var transient: (backoff: Duration, hint: MemoryPressureLevel, source: PressureSignal, scheduled: Bool, failures: Int)?

    init(loop: EventLoop, sampler: SnapshotSampler, configuration: MonitorConfiguration, logger: Logger, ledger: ReleaseLedger,
         emit: @escaping (LevelEvent) -> Void, read: @escaping (MonitorReading) -> Void, describeSources: @escaping ([String]) -> Void,
         transientError: @escaping (CgroupError?) -> Void = { _ in }) {
        self.transientError = transientError
        self.loop = loop
        self.sampler = sampler
        self.configuration = configuration
        self.logger = logger
        self.ledger = ledger
        self.emit = emit
        self.read = read
        self.describeSources = describeSources
        self.evaluator = LevelEvaluator(policy: configuration.policy)
        self.growth = GrowthEstimator(window: configuration.policy.growthWindow)
    }

    /// Takes the first reading, emits it, and registers every source. Loop thread.
    func start() throws(CgroupError) {
        let snapshot = try sampler.sample()
        try registerCgroupSources(snapshot)
        if configuration.watchesPressureStall { try registerPressureStall() }
        try registerSystemd()
        if pollsUsage || !pressureSamplers.isEmpty {
            schedulePoll()
        }
        describeSources(sourceNames)
        // Emitted once every source is live, so an observer of the first event misses nothing.
        lastRatio = snapshot.limit == nil ? 0 : snapshot.ratio
        let forecast = observeGrowth(snapshot, ledgerBefore: ledger.current)
        _ = evaluator.evaluate(snapshot, hint: .normal, now: .now)
        let event = LevelEvent(level: evaluator.level, previous: nil, source: .initial, snapshot: snapshot, forecast: forecast)
        emit(event)
        read(MonitorReading(event: event, rise: nil, growthBytesPerSecond: growth.estimate?.sustainedBytesPerSecond ?? 0, tally: tally,
                                  detectionBound: detectionBound))
        scheduleRecheckIfRaised()
    }

    // MARK: Sources

    private func registerCgroupSources(_ snapshot: PressureSnapshot) throws(CgroupError) {
        guard let cgroup = sampler.layout.memory else {
            pollsUsage = true
            sourceNames.append("poll /proc/meminfo every \(policy.pollInterval) (no memory controller)")
            return
        }
        switch cgroup.version {
        case .v1:
            let before = (notifications: notifications.count, names: sourceNames.count)
            do {
                try registerV1Notifications(cgroup, snapshot)
            } catch where error.code == .permissionDenied || error.errno == EACCES || error.errno == EPERM {
                // cgroup.event_control is root's: a normal user's monitor polls instead (documented).
                for notification in notifications[before.notifications...] { loop.unwatch(notification.descriptor) }
                notifications.removeSubrange(before.notifications...)
                sourceNames.removeSubrange(before.names...)
                pollsUsage = true
                sourceNames.append("poll \(cgroup.file("memory.usage_in_bytes")) every \(policy.pollInterval) (v1 notifications need write access to cgroup.event_control, which is root's)")
                logger.notice("cgroup v1 notifications are not permitted for this user; polling usage instead", metadata: [
                    "cgroup": "\(cgroup.directory)", "pollInterval": "\(policy.pollInterval)", "error": "\(error)",
                ])
            }
        case .v2:
            pollsUsage = true
            sourceNames.append("poll \(cgroup.file("memory.current")) every \(policy.pollInterval) (cgroup v2 has no usage thresholds)")
            lastEvents = try sampler.reader?.events()
            let watch = try FileModifyWatch(path: cgroup.file("memory.events"), files: sampler.files)
            fileWatches.append(watch)
            try loop.watch(watch.descriptor, events: EPOLLIN.rawValue) { [unowned self] _ in
                if watch.drain() {
                    fail(CgroupError(.notFound, "the cgroup was removed", path: cgroup.directory))
                    return
                }
                memoryEventsChanged()
            }
            sourceNames.append("inotify \(cgroup.file("memory.events"))")
        }
    }

    /// The v1 event sources: usage thresholds (or polling without a limit), OOM and pressure-level
    /// notifications — all through `cgroup.event_control`.
    private func registerV1Notifications(_ cgroup: CgroupLocation, _ snapshot: PressureSnapshot) throws(CgroupError) {
        if let limit = snapshot.limit?.bytes {
            for ratio in Self.thresholdRatios(policy) {
                let bytes = UInt64(Double(limit) * ratio)
                try add(CgroupV1Notification(cgroup: cgroup, file: "memory.usage_in_bytes", argument: String(bytes), files: sampler.files),
                        hint: .normal, source: .usageThreshold)
                sourceNames.append("usage-threshold \(bytes) bytes (\(Int((ratio * 100).rounded()))% of \(limit))")
            }
        } else {
            pollsUsage = true
            sourceNames.append("poll /proc/meminfo every \(policy.pollInterval) (no cgroup limit)")
        }
        try add(CgroupV1Notification(cgroup: cgroup, file: "memory.oom_control", argument: "", files: sampler.files), hint: .critical, source: .oom)
        sourceNames.append("oom-control")
        for (level, argument) in [(MemoryPressureLevel.warning, "medium"), (.critical, "critical")] {
            let notification = try CgroupV1Notification(cgroup: cgroup, file: "memory.pressure_level", argument: argument, files: sampler.files)
            notifications.append(notification)
            try loop.watch(notification.descriptor, events: EPOLLIN.rawValue) { [unowned self] _ in
                guard notification.drain() > 0 else { return }
                // Coalesce the flood: listen again only after the quiet time.
                loop.rewatch(notification.descriptor, events: 0)
                loop.schedule(at: .now + policy.pressureLevelQuietTime) { [unowned self] in
                    loop.rewatch(notification.descriptor, events: EPOLLIN.rawValue)
                }
                wake(hint: level, source: .pressureLevel)
            }
            sourceNames.append("pressure-level \(argument)")
        }
    }

    /// The v1 usage thresholds: the recovery, warning and critical marks, and every 5 % of the
    /// limit from half of it up, so a climb gives the growth estimate an event-driven reading
    /// each twentieth of the limit (a crossing wakes the monitor in about a millisecond).
    static func thresholdRatios(_ policy: PressurePolicy) -> [Double] {
        let steps = (10...19).map { Double($0) * 0.05 }
        var ratios = [policy.recoveryRatio, policy.warningRatio, policy.criticalRatio].filter { $0 <= 1 }
        for step in steps where !ratios.contains(where: { abs($0 - step) < 0.01 }) { ratios.append(step) }
        return ratios.sorted()
    }

    private func add(_ notification: CgroupV1Notification, hint: MemoryPressureLevel, source: PressureSignal) throws(CgroupError) {
        notifications.append(notification)
        try loop.watch(notification.descriptor, events: EPOLLIN.rawValue) { [unowned self] _ in
            guard notification.drain() > 0 else { return }
            wake(hint: hint, source: source)
        }
    }

    private func registerPressureStall() throws(CgroupError) {
        guard let path = sampler.pressureFile else {
            sourceNames.append("no PSI (kernel without /proc/pressure)")
            return
        }
        let privileged = (try? Capabilities.effective(Capabilities.sysResource, files: sampler.files)) ?? false
        for (kind, percent, level) in [(StallKind.some, policy.psiSomeWarningPercent, MemoryPressureLevel.warning), (.full, policy.psiFullCriticalPercent, .critical)] {
            switch try PressureWatch.make(path: path, kind: kind, percent: percent, window: policy.psiWindow, privileged: privileged, files: sampler.files) {
            case .trigger(let trigger):
                triggers.append(trigger)
                try loop.watch(trigger.descriptor, events: EPOLLPRI.rawValue | EPOLLERR.rawValue) { [unowned self] flags in
                    if flags & EPOLLERR.rawValue != 0 {
                        loop.unwatch(trigger.descriptor)
                        logger.warning("PSI trigger source went away", metadata: ["path": "\(path)"])
                        return
                    }
                    wake(hint: level, source: .psiTrigger)
                }
                sourceNames.append("psi-trigger \(kind.rawValue) \(trigger.threshold.microseconds)us/\(trigger.window.microseconds)us on \(path)")
            case .sampling(let fallback):
                pressureSamplers.append(fallback)
                logger.notice("PSI trigger refused; sampling instead", metadata: ["path": "\(path)", "reason": "\(fallback.reason)"])
                sourceNames.append("poll \(path) \(kind.rawValue) total every \(policy.pollInterval) (trigger refused: \(fallback.reason.message))")
            }
        }
    }

    private func registerSystemd() throws(CgroupError) {
        guard let watch = try SystemdPressureWatch.fromEnvironment(configuration.environment) else { return }
        systemdWatch = watch
        try loop.watch(watch.descriptor, events: watch.events) { [unowned self] _ in
            if !watch.drain() { loop.unwatch(watch.descriptor) }
            wake(hint: .warning, source: .systemd)
        }
        sourceNames.append("systemd \(watch.path)")
    }

    private func memoryEventsChanged() {
        guard let reader = sampler.reader else { return }
        let counters: MemoryEventCounters
        do {
            counters = try reader.events()
        } catch where error.isTransient {
            // The counters are compared with the last ones read: the change is seen on the retry.
            retry(after: error, hint: .normal, source: .memoryEvents)
            return
        } catch {
            fail(error)
            return
        }
        let previous = lastEvents ?? counters
        lastEvents = counters
        if counters.oom > previous.oom || counters.oomKill > previous.oomKill || counters.oomGroupKill > previous.oomGroupKill {
            wake(hint: .critical, source: .oom)
        } else if counters.max > previous.max {
            wake(hint: .critical, source: .memoryEvents)
        } else if counters.high > previous.high {
            wake(hint: .warning, source: .memoryEvents)
        } else {
            wake(hint: .normal, source: .memoryEvents)
        }
    }

    // MARK: Evaluation

    /// Reads a snapshot and evaluates it.
    func wake(hint: MemoryPressureLevel, source: PressureSignal) {
        guard failure == nil else { return }
        let ledgerBefore = ledger.current
        let snapshot: PressureSnapshot
        do {
            snapshot = try sampler.sample()
        } catch where error.isTransient {
            retry(after: error, hint: hint, source: source)
            return
        } catch {
            fail(error)
            return
        }
        if let transient {
            self.transient = nil
            logger.notice("memory monitor reads again after transient errors", metadata: ["failures": "\(transient.failures)"])
            transientError(nil)
        }
        let forecast = observeGrowth(snapshot, ledgerBefore: ledgerBefore)
        var hint = hint, source = source
        // The forecast raises .warning only where nothing else already asks for it.
        if LevelEvaluator.candidate(for: snapshot, current: evaluator.level, hint: hint, policy: policy) < .warning,
           ForecastRule.warns(forecast, snapshot: snapshot, policy: policy) {
            hint = .warning
            source = .forecast
        }
        evaluate(snapshot, hint: hint, source: source, forecast: forecast)
    }

    /// Feeds the growth estimate (unless a release was under way or ended while the files were
    /// read) and returns the forecast; settles a pending forecast warning.
    private func observeGrowth(_ snapshot: PressureSnapshot, ledgerBefore: ReleaseLedger.Entry) -> PressureForecast? {
        let ledgerAfter = ledger.current
        let now = ContinuousClock.now.secondsSinceStart
        if snapshot.capacityBytes != lastCapacity {
            growth.reset()
            lastCapacity = snapshot.capacityBytes
        }
        let compensated = Double(snapshot.usageBytes) + Double(ledgerAfter.releasedBytes)
        if let capacity = snapshot.capacityBytes, ledgerBefore == ledgerAfter, !ledgerAfter.inFlight {
            growth.add(seconds: now, bytes: compensated, capacityBytes: Double(capacity))
        }
        if let pending = pendingForecast, let capacity = snapshot.capacityBytes {
            let grown = Double(snapshot.usageBytes) + Double(ledgerAfter.releasedBytes &- pending.releasedBytes)
            if grown >= Double(capacity) * policy.warningRatio {
                tally.confirmed += 1
                pendingForecast = nil
            } else if now >= pending.deadline {
                tally.falseAlarms += 1
                pendingForecast = nil
            }
        }
        return ForecastRule.forecast(growth.estimate, snapshot: snapshot, policy: policy)
    }

    private func evaluate(_ snapshot: PressureSnapshot, hint: MemoryPressureLevel, source: PressureSignal, forecast: PressureForecast?) {
        lastRatio = snapshot.limit == nil ? 0 : snapshot.ratio
        let previous = evaluator.level
        let outcome = evaluator.evaluate(snapshot, hint: hint, now: .now)
        var rise: MemoryPressureLevel?
        if let change = outcome.change {
            // A step down is caused by the signal that first saw the lower level.
            let cause = change < previous ? (stepDown?.source ?? source) : source
            cancelStepDown()
            if change > previous {
                rise = change
                if cause == .forecast { noteForecastWarning(snapshot, forecast: forecast) }
            }
            let event = LevelEvent(level: change, previous: previous, source: cause, snapshot: snapshot, forecast: forecast)
            emit(event)
            read(MonitorReading(event: event, rise: rise, growthBytesPerSecond: growth.estimate?.sustainedBytesPerSecond ?? 0, tally: tally,
                                  detectionBound: detectionBound))
        } else if let at = outcome.stepDownAt {
            if stepDown == nil {
                let id = loop.schedule(at: at) { [unowned self] in
                    let cause = stepDown?.source ?? source
                    wake(hint: .normal, source: cause)
                }
                stepDown = (id, source)
            }
        } else {
            cancelStepDown()  // the level stands again: a pending step down is void
        }
        if rise == nil {
            let event = LevelEvent(level: evaluator.level, previous: evaluator.level, source: source, snapshot: snapshot, forecast: forecast)
            read(MonitorReading(event: event, rise: nil, growthBytesPerSecond: growth.estimate?.sustainedBytesPerSecond ?? 0, tally: tally,
                                  detectionBound: detectionBound))
        }
        scheduleRecheckIfRaised()
    }

    /// How long the next detection of a usage change can take.
    private var detectionBound: Duration { pollsUsage ? policy.pollInterval : MonitorReading.eventDrivenDetection }

    /// Counts a forecast warning and sets the deadline by which its growth must show.
    private func noteForecastWarning(_ snapshot: PressureSnapshot, forecast: PressureForecast?) {
        if pendingForecast != nil { tally.falseAlarms += 1 }  // superseded before it was settled
        tally.raised += 1
        guard let forecast, let capacity = snapshot.capacityBytes else { return }
        let toWarning = max(0, Double(capacity) * policy.warningRatio - Double(snapshot.usageBytes)) / forecast.growth.bytesPerSecond
        pendingForecast = (ledger.current.releasedBytes, ContinuousClock.now.secondsSinceStart + 2 * toWarning + 1)
    }

    private func cancelStepDown() {
        if let pending = stepDown { loop.cancelDeadline(pending.deadline) }
        stepDown = nil
    }

    /// Re-reads every recheck interval while the level is raised (to find the way down) and
    /// while usage sits between the recovery and warning marks: the kernel checks v1 usage
    /// thresholds only every 128 page events per CPU, so a crossing followed by silence can
    /// go unreported; near a mark the re-check bounds that delay. Below the recovery mark at
    /// `.normal` nothing is scheduled and the loop sleeps.
    private func scheduleRecheckIfRaised() {
        if let id = recheckDeadline { loop.cancelDeadline(id) }
        recheckDeadline = nil
        let nearMark = lastRatio >= policy.recoveryRatio && sampler.layout.memory?.version == .v1
        guard evaluator.level > .normal || nearMark, stepDown == nil else { return }
        recheckDeadline = loop.schedule(at: .now + policy.recheckInterval) { [unowned self] in
            recheckDeadline = nil
            wake(hint: .normal, source: .recheck)
        }
    }

    private func schedulePoll() {
        loop.schedule(at: .now + policy.pollInterval) { [unowned self] in
            guard failure == nil else { return }
            poll()
            schedulePoll()
        }
    }

    /// The documented fallback: sample what has no event.
    private func poll() {
        var hint = MemoryPressureLevel.normal
        var source = PressureSignal.poll
        if !pressureSamplers.isEmpty, let path = sampler.pressureFile {
            do {
                let stall = try PressureStall.parse(sampler.files.read(path), path: path)
                for index in pressureSamplers.indices {
                    if let percent = pressureSamplers[index].sample(stall, at: .now), percent >= pressureSamplers[index].percent {
                        hint = max(hint, pressureSamplers[index].kind == .some ? .warning : .critical)
                        source = .poll
                    }
                }
            } catch where error.isTransient {
                logger.debug("PSI not read this poll", metadata: ["error": "\(error)"])  // usage still is, below
            } catch {
                fail(error)
                return
            }
        }
        wake(hint: hint, source: source)
    }

    /// A read failed transiently (out of descriptors or memory, interrupted): keep every
    /// source, say so once, and read again after a wait that doubles up to a second, with the
    /// strongest hint seen meanwhile. The monitor never stops for this.
    private func retry(after error: CgroupError, hint: MemoryPressureLevel, source: PressureSignal) {
        var state = transient ?? (backoff: .milliseconds(5), hint: .normal, source: source, scheduled: false, failures: 0)
        if transient == nil {
            logger.warning("memory monitor: a read failed transiently; it keeps its sources and retries", metadata: ["error": "\(error)"])
        }
        state.failures += 1
        if hint >= state.hint { (state.hint, state.source) = (hint, source) }
        transientError(error)
        guard !state.scheduled else {
            transient = state
            return
        }
        state.backoff = min(state.backoff * 2, .seconds(1))
        state.scheduled = true
        transient = state
        loop.schedule(at: .now + state.backoff) { [unowned self] in
            guard failure == nil, var pending = transient else { return }
            pending.scheduled = false
            transient = pending
            if pending.source == .memoryEvents && pending.hint == .normal {
                memoryEventsChanged()
            } else {
                wake(hint: pending.hint, source: pending.source)
            }
        }
    }

    private func fail(_ error: CgroupError) {
        guard failure == nil else { return }
        failure = error
        logger.error("memory monitor stopped", metadata: ["error": "\(error)"])
        loop.stop()
    }

    /// Releases every source. Loop thread, after the loop ended.
    func tearDown() {
        for notification in notifications { loop.unwatch(notification.descriptor) }
        for trigger in triggers { loop.unwatch(trigger.descriptor) }
        for watch in fileWatches { loop.unwatch(watch.descriptor) }
        if let systemdWatch { loop.unwatch(systemdWatch.descriptor) }
        notifications = []
        triggers = []
        fileWatches = []
        systemdWatch = nil
    }
}

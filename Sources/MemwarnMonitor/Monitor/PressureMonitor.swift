public import CgroupKit
public import Logging
public import MemwarnRelease
import MemwarnSystem
public import Metrics
public import ServiceLifecycle
import Synchronization

/// Watches a memory cgroup and the kernel's pressure signals, and reports memory-pressure
/// levels: the Linux counterpart of iOS's memory warnings.
///
/// Creating a monitor **arms** it: it finds the cgroup, opens and registers its sources, takes
/// the first reading and starts its release thread before the initializer returns (a few
/// milliseconds; ``arming`` says how long), so the services started after it are protected from
/// their first instruction. Run it as a `Service` in a `ServiceGroup` (or call ``run()``
/// yourself) to keep it running; it stops on graceful shutdown or task cancellation, and a
/// failure to arm is thrown by ``run()``. While it runs, a thread of its own sleeps in
/// `epoll_wait` until the kernel reports something — a v1 usage threshold crossed, a
/// pressure or OOM notification, a PSI trigger, a change of v2 `memory.events`, systemd's
/// pressure watch — and then reads the cgroup's files. Where the kernel sends no usage events
/// (cgroup v2, a v1 monitor not run as root, no limit) it samples usage adaptively, one `pread`
/// a reading: as soon as usage, growing at ``PressurePolicy/worstCaseGrowthBytesPerSecond``,
/// could reach the next mark (every 5 ms near a mark, at most every
/// ``PressurePolicy/pollInterval`` far from them); on cgroup v1 as root it samples only in the
/// guard bands just below the marks, for crossings the kernel leaves unreported.
/// ``watchedSources`` says which.
///
/// ```swift
/// let monitor = PressureMonitor(configuration: .init(policy: try .load(environment: env)), logger: logger)
/// monitor.addObserver { event in
///     if event.level >= .warning { cache.removeAllObjects() }
/// }
/// let group = ServiceGroup(services: [monitor, myService], logger: logger)
/// try await group.run()
/// ```
public final class PressureMonitor: Service, Sendable {
    /// A registered observer, for ``removeObserver(_:)``.
    public struct ObserverToken: Sendable, Hashable {
        fileprivate let id: Int
    }

    /// Where the monitor is in its life.
    private enum Phase {
        /// Not armed: a run ended, or arming is under way.
        case idle
        /// Armed, waiting for ``run()``.
        case armed(MonitorSession)
        /// Arming failed; the next ``run()`` throws this.
        case failedToArm(any Error)
        /// ``run()`` is under way with this session.
        case running(MonitorSession)
        /// Turned off by ``MonitorConfiguration/disableVariable``: never armed, ``run()`` only
        /// waits for shutdown.
        case disabled
    }

    private struct State {
        var phase = Phase.idle
        var arming: MonitorArming?
        var usageWatch: MonitorArming.UsageWatch?
        var sources: [String] = []
        var exhaustion: MemoryExhaustion?
        var tally = ForecastTally()
        var latestForecast: PressureForecast?
        /// The latest full reading (every reading, not only level changes).
        var latestSnapshot: PressureSnapshot?
        var transientErrors = 0
        var lastTransientError: CgroupError?
        var retryingReads = false
        /// ``run()`` was asked to end: a policy applied now re-arms nothing.
        var stopping = false
    }

    /// The configuration it runs with: the policy is the one last applied
    /// (``apply(policy:)``).
    public var configuration: MonitorConfiguration { currentConfiguration.withLock { $0 } }
    /// The critical mark of the policy last applied, without copying the configuration (its
    /// environment): admission asks at every reservation.
    package var criticalRatio: Double { currentConfiguration.withLock { $0.policy.criticalRatio } }
    private let currentConfiguration: Locked<MonitorConfiguration>
    /// Held while a policy is applied: one change at a time.
    private let policyChange = Locked(())
    package let logger: Logger
    private let state = Locked(State())
    private let levelEvents = Broadcaster<LevelEvent>(replaysLatest: true)
    private let exhaustionChanges = Broadcaster<MemoryExhaustion>()
    private let exhausted = Atomic<Bool>(false)
    private let samples: UsageSampleCount
    /// The readings the engines decided, one a reading (the tests count them).
    private let decisions = SharedCount()
    /// The ancestors a node agent coordinates for this monitor (``coordinate(cgroupPath:agentPid:for:)``).
    private let leases: AgentLeases
    private let coordinators = AttachedCoordinators()
    private let metrics: MonitorMetrics

    /// Creates a monitor and arms it: when it returns, the cgroup's sources are registered, the
    /// first reading is taken (``latestEvent``) and the release thread waits for readings. A
    /// failure to arm is kept and thrown by ``run()``. With `MEMWARN_DISABLE=1` in the
    /// configuration's environment (``MonitorConfiguration/disableVariable``) it does not arm:
    /// it reads nothing and reports nothing.
    ///
    /// - Parameters:
    ///   - configuration: what to watch and the policy.
    ///   - logger: the caller's logger; memwarn never bootstraps logging.
    ///   - metricsFactory: where to report the level, usage, growth, forecast, release and
    ///     exhaustion metrics (``MemwarnMetric/all`` lists them: `memwarn_usage_bytes`,
    ///     `memwarn_released_bytes_total`, …); `nil` uses the process's bootstrapped factory (a
    ///     no-op one unless the application set one up).
    public init(configuration: MonitorConfiguration, logger: Logger, metricsFactory: (any MetricsFactory)? = nil) {
        currentConfiguration = Locked(configuration)
        self.logger = logger
        leases = AgentLeases(policy: configuration.policy)
        metrics = MonitorMetrics(factory: metricsFactory ?? MetricsSystem.factory)
        samples = UsageSampleCount(metrics: metrics)
        let phase: Phase
        do {
            if try configuration.isDisabled() {
                phase = .disabled
                logger.notice("memwarn is turned off by \(MonitorConfiguration.disableVariable): no levels, no releases")
            } else {
                phase = .armed(try arm())
            }
        } catch {
            phase = .failedToArm(error)
            logger.error("memory monitor could not be armed; run() reports why", metadata: ["error": "\(error)"])
        }
        state.withLock { $0.phase = phase }
    }

    deinit {
        // A monitor armed but never run ends its threads (the engine's, and the release thread with it).
        if case .armed(let session) = state.withLock({ $0.phase }) { session.stop() }
    }

    /// Stops an armed monitor that was never run, and waits until its sources are torn down: for
    /// `memwarn run`, whose command could not start, before it removes the cgroup.
    package func disarm() {
        let session: MonitorSession? = state.withLock { state in
            guard case .armed(let session) = state.phase else { return nil }
            state.phase = .idle
            state.arming = nil
            state.usageWatch = nil
            return session
        }
        session?.stopAndWait()
        levelEvents.finish()
    }

    /// How the monitor was armed — how long it took, how changes of usage reached it — or `nil`
    /// while it is not armed (arming failed, or a run ended).
    public var arming: MonitorArming? { state.withLock { $0.arming } }

    /// How changes of usage reach the monitor now, or `nil` while it is not armed. On cgroup v1
    /// as root it is ``MonitorArming/UsageWatch/adaptiveSampling`` from arming until the usage
    /// thresholds are registered (about 0.3 s; ``MonitorArming/pendingThresholds``), then
    /// ``MonitorArming/UsageWatch/thresholds``.
    public var usageWatch: MonitorArming.UsageWatch? { state.withLock { $0.usageWatch } }

    /// The current level (`.normal` before the first reading).
    public var level: MemoryPressureLevel { levelEvents.latest?.level ?? .normal }

    /// The latest level event, or `nil` before the first reading.
    public var latestEvent: LevelEvent? { levelEvents.latest }

    /// What the running monitor listens to, one line a source, such as
    /// `usage-threshold 53687091 bytes (80% of 67108864)` or
    /// `poll /proc/pressure/memory some total every 1s (trigger refused: …)`.
    public var watchedSources: [String] { state.withLock { $0.sources } }

    /// Level events: the latest one first (when there is one), then every change, until
    /// the monitor stops or the consumer stops iterating.
    ///
    /// Each call makes an independent stream; a slow consumer sees every event in order
    /// (the stream buffers them).
    ///
    /// - Returns: a new stream of level events.
    public func events() -> AsyncStream<LevelEvent> {
        levelEvents.stream()
    }

    /// Calls `observer` with the latest level event — the first reading, taken when the monitor
    /// was armed, or a later one — and then with every level event after it, in order, on the
    /// monitor's thread: return quickly.
    ///
    /// - Parameter observer: called with each level event.
    /// - Returns: a token for ``removeObserver(_:)``.
    @discardableResult
    public func addObserver(_ observer: @escaping @Sendable (LevelEvent) -> Void) -> ObserverToken {
        let once = LatestFirst(observer)
        let token = ObserverToken(id: levelEvents.addObserver { event in once.deliver(event) })
        // The latest event, handed over on the monitor's thread, where every event is posted: it
        // comes first, unless an event posted meanwhile reached the observer already.
        currentSession?.onLoop { [levelEvents] in
            if let latest = levelEvents.latest { once.deliverFirst(latest) }
        }
        return token
    }

    /// Stops calling an observer, or detaches a coordinator (the token of
    /// ``/MemwarnMonitor/MemwarnRelease/ReleaseCoordinator/attach(to:)``).
    ///
    /// - Parameter token: what ``addObserver(_:)``, ``addExhaustionObserver(_:)`` or
    ///   ``/MemwarnMonitor/MemwarnRelease/ReleaseCoordinator/attach(to:)`` returned.
    public func removeObserver(_ token: ObserverToken) {
        levelEvents.removeObserver(token.id)
        exhaustionChanges.removeObserver(token.id)
        coordinators.detach(id: token.id)
    }

    /// Whether memory is exhausted now (see ``/MemwarnRelease/MemoryExhaustion``): one atomic load, cheap
    /// enough for every request a service handles.
    public var isMemoryExhausted: Bool { exhausted.load(ordering: .relaxed) }

    /// The latest change of the exhausted state, or `nil` when it was never entered.
    public var exhaustion: MemoryExhaustion? { state.withLock { $0.exhaustion } }

    /// The forecast warnings raised so far and how they turned out.
    public var forecastTally: ForecastTally { state.withLock { $0.tally } }

    /// The forecast of the latest reading, or `nil` when usage is not clearly growing.
    public var latestForecast: PressureForecast? { state.withLock { $0.latestForecast } }

    /// The latest full reading's snapshot (``MemoryAdmission`` takes the binding limit from it).
    var latestSnapshot: PressureSnapshot? { state.withLock { $0.latestSnapshot } }

    /// How many reads failed transiently — out of file descriptors or memory (`EMFILE`,
    /// `ENFILE`, `ENOMEM`), interrupted (`EINTR`, `EAGAIN`) — since the monitor was made. The
    /// monitor never stops for these: it keeps its sources, logs a warning once per episode,
    /// counts them (`memwarn_transient_errors_total`) and reads again after a wait that doubles
    /// up to a second.
    public var transientErrorCount: Int { state.withLock { $0.transientErrors } }

    /// How many times usage was sampled since the monitor was made: the cheap reads of adaptive
    /// sampling (where the kernel sends no usage events) and of the guard bands (cgroup v1 as
    /// root); one `pread` each (`memwarn_usage_samples_total`).
    public var usageSampleCount: Int { samples.value }

    /// What the armed or running session has read and decided (zeros when none is): the tests
    /// count them to hold one reading and one decision to a kernel event.
    var readingCounts: (readings: Int, measurements: Int, decisions: Int) {
        switch state.withLock({ $0.phase }) {
        case .armed(let session), .running(let session):
            (session.sampler.readCount, session.sampler.measurementCount, decisions.value)
        default: (0, 0, decisions.value)
        }
    }

    /// The latest transient read error, if any.
    public var lastTransientError: CgroupError? { state.withLock { $0.lastTransientError } }

    /// Whether reads are failing transiently now (the monitor is retrying them).
    public var isRetryingReads: Bool { state.withLock { $0.retryingReads } }

    /// Calls `observer` when memory becomes exhausted and when it stops being so (on the
    /// monitor's release thread).
    ///
    /// - Parameter observer: called with each change of exhaustion.
    /// - Returns: a token for ``removeObserver(_:)``.
    @discardableResult
    public func addExhaustionObserver(_ observer: @escaping @Sendable (MemoryExhaustion) -> Void) -> ObserverToken {
        ObserverToken(id: exhaustionChanges.addObserver(observer))
    }

    /// Adds a coordinator to the release loop (``/MemwarnMonitor/MemwarnRelease/ReleaseCoordinator/attach(to:)``); attaching
    /// one twice returns the first token (it would otherwise release twice per reading).
    func attach(_ coordinator: ReleaseCoordinator) -> ObserverToken {
        ObserverToken(id: coordinators.attach(coordinator, id: Broadcaster<LevelEvent>.nextID()))
    }

    /// Keeps the armed monitor running — reporting levels and releasing — until graceful
    /// shutdown or cancellation. A monitor run again after it stopped is armed anew here. A
    /// monitor turned off by ``MonitorConfiguration/disableVariable`` only waits for shutdown.
    ///
    /// - Throws: ``MonitorError`` when already running or when the system refuses a thread, an
    ///   epoll instance or an eventfd; ``PolicyError`` for an inconsistent policy; CgroupKit's
    ///   `CgroupError` when the cgroup cannot be found or read, or is deleted while watched;
    ///   ``MonitorError`` for a value of `MEMWARN_DISABLE` that is neither on nor off.
    public func run() async throws {
        /// What ``run()`` finds the monitor in.
        enum Claim {
            case armed(MonitorSession)
            case failedToArm(any Error)
            case needsArming
            case disabled
        }
        let claim = try state.withLock { (state: inout State) throws(MonitorError) -> Claim in
            switch state.phase {
            case .running:
                throw MonitorError(.alreadyRunning, "the monitor is already running")
            case .armed(let session):
                state.phase = .running(session)
                state.stopping = false
                return .armed(session)
            case .failedToArm(let error):
                state.phase = .idle
                return .failedToArm(error)
            case .idle:
                return .needsArming
            case .disabled:
                return .disabled
            }
        }
        let session: MonitorSession
        switch claim {
        case .armed(let armed):
            session = armed
        case .failedToArm(let error):
            levelEvents.finish()  // streams made meanwhile end, as after a run
            throw error
        case .disabled:
            // Turned off: the service runs on as if memwarn were not linked.
            try? await gracefulShutdown()  // returns on shutdown, throws on cancellation: both end the wait
            levelEvents.finish()
            return
        case .needsArming:
            levelEvents.reopen()
            do {
                if try configuration.isDisabled() {
                    try? await gracefulShutdown()  // returns on shutdown, throws on cancellation: both end the wait
                    levelEvents.finish()
                    return
                }
                session = try arm()
            } catch {
                levelEvents.finish()
                throw error
            }
            try state.withLock { (state: inout State) throws(MonitorError) in
                if case .running = state.phase {
                    session.stop()
                    throw MonitorError(.alreadyRunning, "the monitor is already running")
                }
                state.phase = .running(session)
                state.stopping = false
            }
        }
        defer {
            state.withLock { state in
                state.phase = .idle
                state.arming = nil
                state.usageWatch = nil
            }
            levelEvents.finish()
        }
        // A policy applied while running replaces the session: the run goes on with the new one.
        var current = session
        while true {
            let running = current
            try await withTaskCancellationOrGracefulShutdownHandler {
                try await running.waitUntilEnded()
            } onCancelOrGracefulShutdown: { [state] in
                let latest = state.withLock { state -> MonitorSession? in
                    state.stopping = true
                    if case .running(let latest) = state.phase { return latest }
                    return nil
                }
                running.stop()
                latest?.stop()
            }
            let next = state.withLock { state -> MonitorSession? in
                guard !state.stopping, case .running(let latest) = state.phase, latest !== running else { return nil }
                return latest
            }
            guard let next else { break }
            current = next
        }
    }

    /// Applies `policy` to the monitor while it runs (or is armed): its marks, sampling, PSI
    /// triggers and growth settings are planned again on every path, as for a new limit, by
    /// arming a new session with it and ending the old one; the level carries over (its hold
    /// time too), and the first reading at the new marks is a ``LevelEvent`` with source
    /// ``/MemwarnRelease/PressureSignal/policyChange`` only when it changes the level. A monitor
    /// not armed (a run ended) takes the policy at its next ``run()``.
    ///
    /// - Parameter policy: the new policy.
    /// - Throws: ``PolicyError`` for an inconsistent policy, and CgroupKit's `CgroupError` or
    ///   ``MonitorError`` when the monitor cannot be armed anew: either way nothing changes, the
    ///   running policy is kept.
    public func apply(policy: PressurePolicy) throws {
        try policy.validate()
        try policyChange.withLock { _ in
            let before = configuration
            guard before.policy != policy else { return }
            currentConfiguration.withLock { $0.policy = policy }
            leases.update(policy: policy)
            let armed = state.withLock { state -> MonitorSession? in
                guard !state.stopping else { return nil }
                switch state.phase {
                case .armed(let session), .running(let session): return session
                case .idle, .failedToArm, .disabled: return nil
                }
            }
            guard let armed else { return }
            let replacement: MonitorSession
            do {
                replacement = try arm(carrying: level)
            } catch {
                currentConfiguration.withLock { $0.policy = before.policy }
                leases.update(policy: before.policy)
                throw error
            }
            let swapped = state.withLock { state -> Bool in
                switch state.phase {
                case .armed(let session) where session === armed:
                    state.phase = .armed(replacement)
                case .running(let session) where session === armed && !state.stopping:
                    state.phase = .running(replacement)
                default:
                    return false
                }
                return true
            }
            guard swapped else {
                // The run ended meanwhile: the new session is not wanted.
                replacement.stop()
                return
            }
            armed.stop()
            logger.notice(
                "memory monitor: a new policy applies; its marks are planned again",
                metadata: [
                    "warningRatio": "\(policy.warningRatio)", "criticalRatio": "\(policy.criticalRatio)", "recoveryRatio": "\(policy.recoveryRatio)",
                    "level": "\(level)",
                ])
        }
    }

    /// Arms a new session: blocks until its sources are registered and its first reading taken.
    ///
    /// - Parameter level: the level of the session it replaces (a policy applied while running).
    private func arm(carrying level: MemoryPressureLevel? = nil) throws -> MonitorSession {
        let session = try MonitorSession.arm(
            .init(
                configuration: configuration, logger: logger, metrics: metrics, samples: samples, decisions: decisions,
                output: { [weak self] in EngineOutput(self) },
                coordinators: coordinators,
                exhaustionChanged: { [weak self] change in self?.publish(change) }, leases: leases, carriedLevel: level))
        var arming = session.arming
        state.withLock { state in
            arming.sources = state.sources
            state.arming = arming
            // A session armed for a new policy registers its thresholds anew: sampled until they are in.
            if state.usageWatch == nil || arming.pendingThresholds == 0 || level != nil { state.usageWatch = arming.usageWatch }
        }
        metrics.record(arming)
        logger.notice(
            "memory monitor armed",
            metadata: [
                "in": "\(arming.duration)", "sinceProcessStart": "\(arming.sinceProcessStart.map { "\($0)" } ?? "unknown")",
                "usageWatch": "\(arming.usageWatch)", "pendingThresholds": "\(arming.pendingThresholds)", "sources": "\(arming.sources.count)",
            ])
        return session
    }

    /// A node agent (`memwarn agent`, through the control endpoint) coordinates an ancestor's
    /// limit for `duration` (renewed as it runs): the monitor leaves that limit out of its
    /// readings until the lease runs out, then counts it again. The cgroup's own limit is never
    /// left out.
    ///
    /// - Parameters:
    ///   - cgroupPath: the ancestor, as its path inside the memory mount.
    ///   - agentPid: the agent's pid (from the endpoint's peer credentials).
    ///   - duration: the lease, at most a minute.
    package func coordinate(cgroupPath: String, agentPid: Int32, for duration: Duration) {
        let isNew = leases.grant(cgroupPath: cgroupPath, agentPid: agentPid, for: duration)
        if isNew {
            logger.notice("memory monitor: a node agent coordinates an ancestor's limit", metadata: ["cgroup": "\(cgroupPath)", "agent": "\(agentPid)"])
        }
        currentSession?.leaseGranted(isNew: isNew, agentPid: agentPid)
    }

    /// The agent stops coordinating `cgroupPath`: its limit counts again at once.
    package func endCoordination(cgroupPath: String) {
        guard leases.revoke(cgroupPath: cgroupPath) else { return }
        logger.notice("memory monitor: the node agent stopped coordinating an ancestor's limit", metadata: ["cgroup": "\(cgroupPath)"])
        currentSession?.leaseRevoked()
    }

    /// The ancestors coordinated now, with the agents' pids.
    package var coordinatedCgroups: [String: Int32] { leases.current().mapValues(\.agentPid) }

    /// A node agent asked this service to release (a `warn` request from the agent's pid): it
    /// answers the crossings of the limits it coordinates, so the backstop leaves them to it
    /// (``AgentLeases``).
    package func noteAgentAsk(agentPid: Int32) {
        leases.noteAsk(agentPid: agentPid)
    }

    private var currentSession: MonitorSession? {
        state.withLock { state in
            switch state.phase {
            case .armed(let session), .running(let session): session
            case .idle, .failedToArm, .disabled: nil
            }
        }
    }

    /// Every reading: metrics and the latest forecast (the engine hands it to the release loop too).
    fileprivate func take(_ reading: MonitorReading) {
        metrics.record(reading)
        state.withLock { state in
            state.tally = reading.tally
            state.latestForecast = reading.event.forecast
            state.latestSnapshot = reading.event.snapshot
        }
    }

    /// The exhausted state changed (release thread).
    private func publish(_ change: MemoryExhaustion) {
        state.withLock { $0.exhaustion = change }
        exhausted.store(change.isExhausted, ordering: .relaxed)
        metrics.record(change)
        exhaustionChanges.post(change)
    }

    fileprivate func publish(_ event: LevelEvent) {
        metrics.recordChange(to: event.level)
        logger.log(
            level: event.level == .normal ? .info : .warning, "memory pressure \(event.level)",
            metadata: [
                "previous": "\(event.previous?.rawValue ?? "none")", "source": "\(event.source)",
                "usage": "\(event.snapshot.usageBytes)", "limit": "\(event.snapshot.capacityBytes.map(String.init) ?? "none")",
                "secondsToLimit": "\(event.forecast.map { String(Int($0.secondsToLimit.rounded())) } ?? "none")",
            ])
        levelEvents.post(event)
    }

    /// A transient read error (`nil`: reads work again). Monitor thread.
    fileprivate func noteTransient(_ error: CgroupError?) {
        state.withLock { state in
            state.retryingReads = error != nil
            if let error {
                state.transientErrors += 1
                state.lastTransientError = error
            }
        }
        if error != nil { metrics.recordTransientError() }
    }

    fileprivate func noteUsageWatch(_ watch: MonitorArming.UsageWatch, after: Duration) {
        state.withLock { state in
            state.usageWatch = watch
            // The start-up figure only: thresholds planned again for a new limit do not overwrite it.
            if watch == .thresholds, state.arming?.thresholdsRegisteredAfter == nil { state.arming?.thresholdsRegisteredAfter = after }
        }
    }

    fileprivate func noteSources(_ sources: [String]) {
        state.withLock { $0.sources = sources }
    }

    static func gaugeValue(_ level: MemoryPressureLevel) -> Int64 {
        switch level {
        case .normal: 0
        case .warning: 1
        case .critical: 2
        }
    }
}

/// The monitor's side of its engine, on the loop thread. It holds the monitor weakly: a
/// monitor dropped while armed ends its session (``PressureMonitor/deinit``).
private final class EngineOutput: MonitorEngineOutput {
    private weak let monitor: PressureMonitor?

    init(_ monitor: PressureMonitor?) { self.monitor = monitor }

    func engineEmitted(_ event: LevelEvent) { monitor?.publish(event) }
    func engineRead(_ reading: MonitorReading) { monitor?.take(reading) }
    func engineListens(to sources: [String]) { monitor?.noteSources(sources) }
    func engineNoted(transientError: CgroupError?) { monitor?.noteTransient(transientError) }
    func engineWatchesUsage(by watch: MonitorArming.UsageWatch, after: Duration) { monitor?.noteUsageWatch(watch, after: after) }
}

/// An observer of level events that is handed the latest event first, unless a newer one reached
/// it before.
private final class LatestFirst: @unchecked Sendable {
    // @unchecked: `delivered` is touched only on the monitor's loop thread, where every level
    // event is posted and the latest one is handed over.
    private let observer: @Sendable (LevelEvent) -> Void
    private var delivered = false

    init(_ observer: @escaping @Sendable (LevelEvent) -> Void) { self.observer = observer }

    func deliver(_ event: LevelEvent) {
        delivered = true
        observer(event)
    }

    func deliverFirst(_ latest: LevelEvent) {
        guard !delivered else { return }
        deliver(latest)
    }
}

/// Why a ``PressureMonitor`` cannot run: misuse, a bad setting, or a system call it needs that
/// failed.
///
/// Match on ``code`` to handle a kind of failure (new codes may be added); ``file`` and
/// ``line`` say where it was thrown. Two errors are equal when their code, message and `errno`
/// are, wherever they were thrown.
public struct MonitorError: Error, Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible {
    /// The kind of failure.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private enum Base: String, Sendable, Hashable {
            case alreadyRunning, badSetting, systemCallFailed
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// `run()` was called while the monitor runs.
        public static let alreadyRunning = Code(.alreadyRunning)
        /// A setting the monitor reads from the environment has a value it does not know.
        public static let badSetting = Code(.badSetting)
        /// A system call the monitor needs failed: an epoll instance, an eventfd or a thread
        /// the system refused (``MonitorError/errno`` says how).
        public static let systemCallFailed = Code(.systemCallFailed)

        public var description: String { base.rawValue }
    }

    /// The kind of failure.
    public var code: Code
    /// What went wrong.
    public var message: String
    /// The `errno` behind it, when a system call failed.
    public var errno: Int32?
    /// The source file that threw it (`#fileID`).
    public var file: String
    /// The line that threw it.
    public var line: Int

    init(_ code: Code, _ message: String, file: String = #fileID, line: Int = #line) {
        self.code = code
        self.message = message
        self.file = file
        self.line = line
    }

    /// A system call the monitor needs failed.
    init(_ error: SystemError, file: String = #fileID, line: Int = #line) {
        self.init(.systemCallFailed, "the memory monitor cannot run: \(error)", file: file, line: line)
        errno = error.errno
    }

    public var description: String { message }

    /// The message, the code and where it was thrown.
    public var debugDescription: String { "\(message) [\(code), thrown at \(file):\(line)]" }

    public static func == (lhs: MonitorError, rhs: MonitorError) -> Bool {
        lhs.code == rhs.code && lhs.message == rhs.message && lhs.errno == rhs.errno
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(code)
        hasher.combine(message)
        hasher.combine(errno)
    }
}

extension PressureMonitor {
    /// The level one snapshot means on its own (no history: hysteresis starts from `.normal`),
    /// as `memwarn status` reports it.
    ///
    /// - Parameters:
    ///   - snapshot: one reading.
    ///   - policy: the marks.
    ///   - countingPressureStall: whether PSI's averages count, as for a monitor whose
    ///     ``MonitorConfiguration/watchesPressureStall`` is `true` (the default).
    /// - Returns: the level the reading alone reaches.
    public static func level(of snapshot: PressureSnapshot, policy: PressurePolicy, countingPressureStall: Bool = true) -> MemoryPressureLevel {
        LevelMachine.asked(by: snapshot, policy: policy, countsPressureStall: countingPressureStall).level
    }
}

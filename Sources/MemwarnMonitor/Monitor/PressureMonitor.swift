import CgroupKit
public import Logging
package import MemwarnRelease
import MemwarnSystem
public import Metrics
public import ServiceLifecycle
import Synchronization

/// Watches a memory cgroup and the kernel's pressure signals, and reports memory-pressure
/// levels: the Linux counterpart of iOS's memory warnings.
///
/// Creating a monitor **arms** it: it finds the cgroup, opens and registers its sources, takes
/// the first reading and starts its release thread before the initializer returns (a few
/// milliseconds; its log and `memwarn status` say how long), so the services started after it are protected from
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
/// `memwarn status --pid` says which.
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
    /// An observer token: names a registered observer, or an attached coordinator, for
    /// ``removeObserver(_:)``. ``addObserver(_:)`` and ``addExhaustionObserver(_:)`` return one
    /// for the observer they register;
    /// ``/MemwarnMonitor/MemwarnRelease/ReleaseCoordinator/attach(to:)`` returns one for the
    /// coordinator it attaches, and ``removeObserver(_:)`` with that token detaches the
    /// coordinator (it stops releasing for this monitor).
    public struct ObserverToken: Sendable, Hashable {
        let id: Int
    }

    /// Where the monitor is in its life.
    enum Phase {
        /// Not armed: a run ended, or arming is under way.
        case idle
        /// Armed, waiting for ``run()``.
        case armed(MonitorSession)
        /// Arming failed; the next ``run()`` throws this.
        case failedToArm(any Error)
        /// ``run()`` is under way with this session.
        case running(MonitorSession)
        /// Turned off by `disableVariable`: never armed, ``run()`` only
        /// waits for shutdown.
        case disabled
    }

    struct State {
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
    /// The policy last applied, without copying the configuration (its environment): admission
    /// asks at every reservation.
    package var policy: PressurePolicy { currentConfiguration.withLock { $0.policy } }
    let currentConfiguration: Locked<MonitorConfiguration>
    /// Held while a policy is applied: one change at a time.
    let policyChange = Locked(())
    package let logger: Logger
    let state = Locked(State())
    let levelEvents = Broadcaster<LevelEvent>(replaysLatest: true)
    let exhaustionChanges = Broadcaster<MemoryExhaustion>()
    let exhausted = Atomic<Bool>(false)
    let samples: UsageSampleCount
    /// The ancestors a node agent coordinates for this monitor (``coordinate(cgroupPath:agentPid:for:)``).
    let leases: AgentLeases
    let coordinators = AttachedCoordinators()
    let metrics: MonitorMetrics

    /// Creates a monitor and arms it: when it returns, the cgroup's sources are registered, the
    /// first reading is taken (``latestEvent``) and the release thread waits for readings. A
    /// failure to arm is kept and thrown by ``run()``. With `MEMWARN_DISABLE=1` in the
    /// configuration's environment it does not arm:
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

    /// Adds a coordinator to the release loop (``/MemwarnMonitor/MemwarnRelease/ReleaseCoordinator/attach(to:)``); attaching
    /// one twice returns the first token (it would otherwise release twice per reading).
    ///
    /// - Returns: an observer token, its id drawn from the same process-wide sequence as the
    ///   observers' (`Broadcaster.nextID()`): ``removeObserver(_:)`` with it detaches this
    ///   coordinator, and removes no observer.
    func attach(_ coordinator: ReleaseCoordinator) -> ObserverToken {
        ObserverToken(id: coordinators.attach(coordinator, id: Broadcaster<LevelEvent>.nextID()))
    }

    /// Keeps the armed monitor running — reporting levels and releasing — until graceful
    /// shutdown or cancellation. A monitor run again after it stopped is armed anew here. A
    /// monitor turned off by `MEMWARN_DISABLE` only waits for shutdown.
    ///
    /// - Throws: ``MonitorError`` when already running or when the system refuses a thread, an
    ///   epoll instance or an eventfd; ``PolicyError`` for an inconsistent policy; an error whose
    ///   description names the cgroup and the file when the cgroup cannot be found or read, or is
    ///   deleted while watched;
    ///   ``MonitorError`` for a value of `MEMWARN_DISABLE` that is neither on nor off.
    public func run() async throws {
        /// What ``run()`` finds the monitor in, and so where it starts from.
        enum StartingPoint {
            case armed(MonitorSession)
            case failedToArm(any Error)
            case needsArming
            case disabled
        }
        let start = try state.withLock { (state: inout State) throws(MonitorError) -> StartingPoint in
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
        switch start {
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

    var currentSession: MonitorSession? {
        state.withLock { state in
            switch state.phase {
            case .armed(let session), .running(let session): session
            case .idle, .failedToArm, .disabled: nil
            }
        }
    }

    static func gaugeValue(_ level: MemoryPressureLevel) -> Int64 {
        switch level {
        case .normal: 0
        case .warning: 1
        case .critical: 2
        }
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
    package static func level(of snapshot: PressureSnapshot, policy: PressurePolicy, countingPressureStall: Bool = true) -> MemoryPressureLevel {
        LevelMachine.asked(by: snapshot, policy: policy, countsPressureStall: countingPressureStall).level
    }
}

public import CgroupKit
public import Logging
public import Metrics
public import ServiceLifecycle
import MemwarnSystem
import Synchronization

/// Watches a memory cgroup and the kernel's pressure signals, and reports memory-pressure
/// levels: the Linux counterpart of iOS's memory warnings.
///
/// Run it as a `Service` in a `ServiceGroup` (or call ``run()`` yourself); it stops on
/// graceful shutdown or task cancellation. While it runs, a thread of its own sleeps in
/// `epoll_wait` until the kernel reports something — a v1 usage threshold crossed, a
/// pressure or OOM notification, a PSI trigger, a change of v2 `memory.events`, systemd's
/// pressure watch — and only then reads the cgroup's files. Where the kernel offers no
/// event (cgroup v2 usage, system memory when no limit applies, a refused PSI trigger) it
/// samples every ``PressurePolicy/pollInterval``; ``watchedSources`` says which.
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

    private struct State {
        var running = false
        var sources: [String] = []
        var coordinators: [Int: ReleaseCoordinator] = [:]
        var exhaustion: MemoryExhaustion?
        var tally = ForecastTally()
        var latestForecast: PressureForecast?
        var releaseLoop: ReleaseLoop?
        var transientErrors = 0
        var lastTransientError: CgroupError?
        var retryingReads = false
    }

    /// The configuration it runs with.
    public let configuration: MonitorConfiguration
    private let logger: Logger
    private let state = Locked(State())
    private let levelEvents = Broadcaster<LevelEvent>(replaysLatest: true)
    private let exhaustionChanges = Broadcaster<MemoryExhaustion>()
    private let exhausted = Atomic<Bool>(false)
    private let metrics: MonitorMetrics

    /// Creates a monitor; it does nothing until ``run()``.
    ///
    /// - Parameters:
    ///   - configuration: what to watch and the policy.
    ///   - logger: the caller's logger; memwarn never bootstraps logging.
    ///   - metricsFactory: where to report the level, usage, growth, forecast, release and
    ///     exhaustion metrics (the README lists them: `memwarn_usage_bytes`,
    ///     `memwarn_released_bytes_total`, …); `nil` uses the process's bootstrapped factory (a
    ///     no-op one unless the application set one up).
    public init(configuration: MonitorConfiguration, logger: Logger, metricsFactory: (any MetricsFactory)? = nil) {
        self.configuration = configuration
        self.logger = logger
        metrics = MonitorMetrics(factory: metricsFactory ?? MetricsSystem.factory)
    }

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

    /// Calls `observer` with every level event, on the monitor's thread: return quickly.
    ///
    /// - Parameter observer: called with each level event.
    /// - Returns: a token for ``removeObserver(_:)``.
    @discardableResult
    public func addObserver(_ observer: @escaping @Sendable (LevelEvent) -> Void) -> ObserverToken {
        ObserverToken(id: levelEvents.addObserver(observer))
    }

    /// Stops calling an observer, or detaches a coordinator (the token of
    /// ``ReleaseCoordinator/attach(to:)``).
    ///
    /// - Parameter token: what ``addObserver(_:)``, ``addExhaustionObserver(_:)`` or
    ///   ``ReleaseCoordinator/attach(to:)`` returned.
    public func removeObserver(_ token: ObserverToken) {
        levelEvents.removeObserver(token.id)
        exhaustionChanges.removeObserver(token.id)
        _ = state.withLock { $0.coordinators.removeValue(forKey: token.id) }
    }

    /// Whether memory is exhausted now (see ``MemoryExhaustion``): one atomic load, cheap
    /// enough for every request a service handles.
    public var isMemoryExhausted: Bool { exhausted.load(ordering: .relaxed) }

    /// The latest change of the exhausted state, or `nil` when it was never entered.
    public var exhaustion: MemoryExhaustion? { state.withLock { $0.exhaustion } }

    /// The forecast warnings raised so far and how they turned out.
    public var forecastTally: ForecastTally { state.withLock { $0.tally } }

    /// The forecast of the latest reading, or `nil` when usage is not clearly growing.
    public var latestForecast: PressureForecast? { state.withLock { $0.latestForecast } }

    /// How many reads failed transiently — out of file descriptors or memory (`EMFILE`,
    /// `ENFILE`, `ENOMEM`), interrupted (`EINTR`, `EAGAIN`) — since the monitor was made. The
    /// monitor never stops for these: it keeps its sources, logs a warning once per episode,
    /// counts them (`memwarn_transient_errors_total`) and reads again after a wait that doubles
    /// up to a second.
    public var transientErrorCount: Int { state.withLock { $0.transientErrors } }

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

    /// Adds a coordinator to the release loop (``ReleaseCoordinator/attach(to:)``); attaching
    /// one twice returns the first token (it would otherwise release twice per reading).
    func attach(_ coordinator: ReleaseCoordinator) -> ObserverToken {
        state.withLock { state in
            if let existing = state.coordinators.first(where: { $0.value === coordinator }) { return ObserverToken(id: existing.key) }
            let id = Broadcaster<LevelEvent>.nextID()
            state.coordinators[id] = coordinator
            return ObserverToken(id: id)
        }
    }

    /// Discovers the cgroup, registers the kernel's event sources and reports levels until
    /// graceful shutdown or cancellation.
    ///
    /// - Throws: ``MonitorError`` when already running or when the system refuses a thread, an
    ///   epoll instance or an eventfd; ``PolicyError`` for an inconsistent policy; CgroupKit's
    ///   `CgroupError` when the cgroup cannot be found or read, or is deleted while watched.
    public func run() async throws {
        try state.withLock { (state: inout State) throws(MonitorError) in
            guard !state.running else { throw MonitorError("the monitor is already running") }
            state.running = true
        }
        levelEvents.reopen()
        defer {
            state.withLock { $0.running = false }
            levelEvents.finish()
        }
        try configuration.policy.validate()
        let discovery = CgroupDiscovery(files: configuration.files)
        let layout = try configuration.cgroupPath.map { (path) throws(CgroupError) in try discovery.layout(cgroupPath: path) } ?? discovery.layout()
        for note in layout.notes { logger.notice("\(note)") }
        try await watch(layout)
    }

    /// Runs the engine on its thread until shutdown, cancellation or a failed source, with the
    /// release thread beside it.
    private func watch(_ layout: CgroupLayout) async throws {
        let loop: EventLoop
        do {
            loop = try EventLoop()
        } catch {
            throw MonitorError(error)
        }
        let sampler = SnapshotSampler(layout: layout, files: configuration.files)
        let ledger = ReleaseLedger()
        let releaseLoop = ReleaseLoop(context: .init(
            sampler: sampler, policy: configuration.policy, countsPressureStall: configuration.watchesPressureStall, ledger: ledger, metrics: metrics, logger: logger,
            coordinators: { [weak self] in self?.state.withLock { state in state.coordinators.sorted { $0.key < $1.key }.map(\.value) } ?? [] },
            exhaustionChanged: { [weak self] change in self?.publish(change) }))
        let engine = MonitorEngine(loop: loop, sampler: sampler, configuration: configuration, logger: logger, ledger: ledger,
                                   output: EngineOutput(self))
        let box = EngineBox(engine)
        // The release thread lives as long as the engine's: started first, ended after it.
        let (releaseEnded, endRelease) = AsyncStream.makeStream(of: Void.self)
        state.withLock { $0.releaseLoop = releaseLoop }
        do {
            try releaseLoop.start { endRelease.finish() }
        } catch {
            state.withLock { $0.releaseLoop = nil }
            throw MonitorError(error)
        }
        let outcome: Result<Void, any Error>
        do {
            try await runEngine(box, loop: loop)
            outcome = .success(())
        } catch {
            outcome = .failure(error)
        }
        state.withLock { $0.releaseLoop = nil }
        releaseLoop.stop()
        for await _ in releaseEnded {}
        try outcome.get()
    }

    /// Runs the engine on its thread until shutdown, cancellation or a failed source.
    private func runEngine(_ box: EngineBox, loop: EventLoop) async throws {
        try await withTaskCancellationOrGracefulShutdownHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                do throws(SystemError) {
                    try SystemThread.start(name: "memwarn-monitor") {
                        let engine = box.engine
                        do {
                            try engine.loop.run { try engine.start() }
                        } catch {
                            engine.tearDown()
                            continuation.resume(throwing: (error as? SystemError).map(MonitorError.init) ?? error)
                            return
                        }
                        engine.tearDown()
                        if let failure = engine.failure {
                            continuation.resume(throwing: failure)
                        } else {
                            continuation.resume()
                        }
                    }
                } catch {
                    continuation.resume(throwing: MonitorError(error))
                }
            }
        } onCancelOrGracefulShutdown: {
            loop.execute { box.engine.loop.stop() }
        }
    }

    /// Every reading: metrics, the latest forecast, and the release loop.
    fileprivate func take(_ reading: MonitorReading) {
        metrics.record(reading)
        let releaseLoop = state.withLock { state in
            state.tally = reading.tally
            state.latestForecast = reading.event.forecast
            return state.releaseLoop
        }
        releaseLoop?.offer(reading)
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
        logger.log(level: event.level == .normal ? .info : .warning, "memory pressure \(event.level)", metadata: [
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

/// The monitor's side of its engine, on the loop thread.
private final class EngineOutput: MonitorEngineOutput {
    private let monitor: PressureMonitor

    init(_ monitor: PressureMonitor) { self.monitor = monitor }

    func engineEmitted(_ event: LevelEvent) { monitor.publish(event) }
    func engineRead(_ reading: MonitorReading) { monitor.take(reading) }
    func engineListens(to sources: [String]) { monitor.noteSources(sources) }
    func engineNoted(transientError: CgroupError?) { monitor.noteTransient(transientError) }
}

/// Hands the engine to its thread. The engine is used only there once handed over.
private final class EngineBox: @unchecked Sendable {
    // @unchecked: `engine` is touched only on the monitor's loop thread after `run()` hands it over.
    let engine: MonitorEngine
    init(_ engine: MonitorEngine) { self.engine = engine }
}

/// Misuse of a ``PressureMonitor``.
public struct MonitorError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong.
    public var message: String
    /// The `errno` behind it, when a system call failed (an epoll instance, an eventfd or a
    /// thread the system refused).
    public var errno: Int32?

    init(_ message: String) { self.message = message }

    /// A system call the monitor needs failed.
    init(_ error: SystemError) {
        message = "the memory monitor cannot run: \(error)"
        errno = error.errno
    }

    public var description: String { message }
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
        LevelEvaluator.candidate(for: snapshot, current: .normal, hint: .normal, policy: policy, countsPressureStall: countingPressureStall)
    }
}

package import CgroupKit
public import MemwarnRelease

// What a monitor reports: its arming, level, events and observers, exhaustion, forecast, and
// the counts of its reads and transient errors.
extension PressureMonitor {
    /// How the monitor was armed — how long it took, how changes of usage reached it — or `nil`
    /// while it is not armed (arming failed, or a run ended).
    package var arming: MonitorArming? { state.withLock { $0.arming } }

    /// How changes of usage reach the monitor now, or `nil` while it is not armed. On cgroup v1
    /// as root it is `adaptiveSampling` from arming until the usage
    /// thresholds are registered (about 0.3 s; `pendingThresholds`), then
    /// `thresholds`.
    package var usageWatch: MonitorArming.UsageWatch? { state.withLock { $0.usageWatch } }

    /// The current level (`.normal` before the first reading).
    public var level: MemoryPressureLevel { levelEvents.latest?.level ?? .normal }

    /// The latest level event, or `nil` before the first reading.
    public var latestEvent: LevelEvent? { levelEvents.latest }

    /// What the running monitor listens to, one line a source, such as
    /// `usage-threshold 53687091 bytes (80% of 67108864)` or
    /// `poll /proc/pressure/memory some total every 1s (trigger refused: …)`.
    package var watchedSources: [String] { state.withLock { $0.sources } }

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
    /// monitor's event thread (`memwarn-monitor`, the one that reads the kernel's events; not the
    /// release thread): return quickly.
    ///
    /// - Parameter observer: called with each level event.
    /// - Returns: an observer token for ``removeObserver(_:)``.
    @discardableResult
    public func addObserver(_ observer: @escaping @Sendable (LevelEvent) -> Void) -> ObserverToken {
        let once = LatestFirst(observer)
        let token = ObserverToken(id: levelEvents.addObserver { event in once.deliver(event) })
        // The latest event, handed over on the event thread, where every event is posted: it
        // comes first, unless an event posted meanwhile reached the observer already.
        currentSession?.onLoop { [levelEvents] in
            if let latest = levelEvents.latest { once.deliverFirst(latest) }
        }
        return token
    }

    /// Removes what an observer token names: stops calling an observer
    /// (``addObserver(_:)``, ``addExhaustionObserver(_:)``), or detaches a coordinator
    /// (``/MemwarnMonitor/MemwarnRelease/ReleaseCoordinator/attach(to:)`` returns an observer
    /// token too): the coordinator stops releasing for this monitor. A token already removed is
    /// ignored.
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
    package var forecastTally: ForecastTally { state.withLock { $0.tally } }

    /// The forecast of the latest reading, or `nil` when usage is not clearly growing.
    public var latestForecast: PressureForecast? { state.withLock { $0.latestForecast } }

    /// The latest full reading's snapshot (``MemoryAdmission`` takes the binding limit from it).
    var latestSnapshot: PressureSnapshot? { state.withLock { $0.latestSnapshot } }

    /// How many reads failed transiently — out of file descriptors or memory (`EMFILE`,
    /// `ENFILE`, `ENOMEM`), interrupted (`EINTR`, `EAGAIN`) — since the monitor was made. The
    /// monitor never stops for these: it keeps its sources, logs a warning once per episode,
    /// counts them (`memwarn_transient_errors_total`) and reads again after a wait that doubles
    /// up to a second.
    package var transientErrorCount: Int { state.withLock { $0.transientErrors } }

    /// How many times usage was sampled since the monitor was made: the cheap reads of adaptive
    /// sampling (where the kernel sends no usage events) and of the guard bands (cgroup v1 as
    /// root); one `pread` each (`memwarn_usage_samples_total`).
    package var usageSampleCount: Int { samples.value }

    /// The latest transient read error, if any.
    package var lastTransientError: CgroupError? { state.withLock { $0.lastTransientError } }

    /// Whether reads are failing transiently now (the monitor is retrying them).
    package var isRetryingReads: Bool { state.withLock { $0.retryingReads } }

    /// Calls `observer` when memory becomes exhausted and when it stops being so (on the
    /// monitor's release thread, `memwarn-release`).
    ///
    /// - Parameter observer: called with each change of exhaustion.
    /// - Returns: an observer token for ``removeObserver(_:)``.
    @discardableResult
    public func addExhaustionObserver(_ observer: @escaping @Sendable (MemoryExhaustion) -> Void) -> ObserverToken {
        ObserverToken(id: exhaustionChanges.addObserver(observer))
    }
}

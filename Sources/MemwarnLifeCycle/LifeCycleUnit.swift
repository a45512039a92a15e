import Logging
public import MemwarnRelease
public import MemwarnStores
import MemwarnSystem

/// One unit of a service with its own life cycle, as a scene is one of an app's: a tenant, a
/// client session, an open document. Units are made and found through ``LifeCycleApplication``.
///
/// A unit in the background saves its state (``LifeCycleDelegate/didEnterBackground(_:)``,
/// under a deadline), closes its idle shared-resource handles, and — once the save completed
/// and no background task runs — is suspended after ``LifeCycleConfiguration/suspensionDelay``.
/// A suspended unit runs no code: its consumers leave the release tiers and the unit itself
/// joins Memwarn's release tier `suspendedUnits`, where at `.critical` the coordinator
/// terminates suspended units largest first (no `willTerminate`, as on iOS). Asking for a
/// terminated unit again relaunches it with `restoring: true`, to load what it saved.
public final class LifeCycleUnit: MemoryConsumer, Sendable {
    /// Identifies a unit in its application: a tenant's, a session's or a document's name.
    public typealias ID = String
    /// Makes a unit's delegate at each launch.
    public typealias DelegateFactory = @Sendable (LifeCycleUnit) async throws -> any LifeCycleDelegate<LifeCycleUnit>

    /// An object held only to keep it alive, never used: a cache of non-`Sendable` values can
    /// be held by the unit on any thread, since nothing reaches its values through this.
    struct KeptAlive: @unchecked Sendable {
        let object: AnyObject
        init(_ object: AnyObject) { self.object = object }
    }

    struct Storage {
        var delegate: (any LifeCycleDelegate<LifeCycleUnit>)?
        /// Strong: the unit keeps its consumers until it terminates.
        var consumers: [ObjectIdentifier: any MemoryConsumer] = [:]
        /// The stores that stand behind a consumer of `consumers` (a cache behind its
        /// `memoryConsumer`), kept as strongly.
        var owners: [ObjectIdentifier: KeptAlive] = [:]
        var idleClosers: [ObjectIdentifier: any IdleHandleCloser] = [:]
        /// `didEnterBackground` completed since the unit last left the foreground.
        var saved = false
        var launchCount = 0
        var discardCount = 0
        var tasks: [BackgroundTaskIdentifier: BackgroundTask] = [:]
        var nextTaskNumber = 0
        /// When the background time of this stay in the background runs out.
        var backgroundTimeEnds: ContinuousClock.Instant?
        var suspensionTimer: Task<Void, Never>?
        var expiryTimer: Task<Void, Never>?
    }

    /// The unit's identifier, unique in its application.
    public let id: ID
    /// The release tier a suspended unit stands in.
    public let tier = ReleaseTier.suspendedUnits
    let machine: LifeCycleMachine
    let configuration: LifeCycleConfiguration
    let coordinator: ReleaseCoordinator
    let logger: Logger
    let makeDelegate: DelegateFactory
    let storage = Locked(Storage())

    init(
        id: ID, broadcaster: Broadcaster<LifeCycleNotification>, configuration: LifeCycleConfiguration, coordinator: ReleaseCoordinator,
        logger: Logger, makeDelegate: @escaping DelegateFactory
    ) {
        self.id = id
        machine = LifeCycleMachine(subject: .unit(id), broadcaster: broadcaster)
        self.configuration = configuration
        self.coordinator = coordinator
        var logger = logger
        logger[metadataKey: "unit"] = "\(id)"
        self.logger = logger
        self.makeDelegate = makeDelegate
    }

    /// The name in release reports: `unit <id>`.
    public var name: String { "unit \(id)" }

    /// The current state.
    public var state: LifeCycleState { machine.current }

    /// Whether `didEnterBackground` has completed since the unit last left the foreground:
    /// only then may it be suspended, and so terminated.
    public var isStateSaved: Bool { storage.withLock { $0.saved } }

    /// How many times it launched (relaunches included).
    package var launchCount: Int { storage.withLock { $0.launchCount } }

    /// How many times it was terminated while suspended to free memory.
    package var discardCount: Int { storage.withLock { $0.discardCount } }

    /// The delegate of the current launch (`nil` while not running).
    public var delegate: (any LifeCycleDelegate<LifeCycleUnit>)? { storage.withLock { $0.delegate } }

    /// Makes a consumer part of the unit: released and unregistered when the unit terminates,
    /// out of the release tiers while it is suspended, and — for a `ResourcePool` — its idle
    /// handles closed when the unit enters the background.
    /// The unit holds it strongly until it terminates. Call from the delegate, typically in
    /// `willFinishLaunching`. The tiers are the application's coordinator's: a store made with
    /// another coordinator (memwarn's stores join `.shared` by default) stays in that one's
    /// tiers while the unit is suspended.
    ///
    /// - Parameter consumer: a store or pool the unit owns.
    public func adopt(_ consumer: any MemoryConsumer) {
        storage.withLock { storage in
            storage.consumers[ObjectIdentifier(consumer)] = consumer
            if let closer = consumer as? any IdleHandleCloser { storage.idleClosers[ObjectIdentifier(consumer)] = closer }
        }
        if machine.current != .suspended { coordinator.register(consumer) }
    }

    /// Makes a cache part of the unit, as ``adopt(_:)-(MemoryConsumer)`` does for other
    /// stores: its `memoryConsumer` joins the unit, and the unit holds the
    /// cache itself strongly until it terminates.
    ///
    /// - Parameter cache: a cache the unit owns.
    public func adopt<Key: Hashable & Sendable, Value>(_ cache: DiscardableCache<Key, Value>) {
        let consumer = cache.memoryConsumer
        storage.withLock { $0.owners[ObjectIdentifier(consumer)] = KeptAlive(cache) }
        adopt(consumer)
    }

    /// The unit's consumers, as adopted.
    public var consumers: [any MemoryConsumer] { storage.withLock { Array($0.consumers.values) } }

    /// The bytes its consumers hold.
    public var footprintBytes: Int { consumers.reduce(0) { $0 + $1.footprintBytes } }

    /// Performs one legal transition (see ``LifeCycleTransition``), after any under way.
    /// From not running it launches (the delegate is made first, once the transition is known
    /// to be legal). From suspended to the background it resumes the unit to run there: it is
    /// told `didEnterBackground`, and suspended again once idle.
    ///
    /// - Parameter target: the state to move to, one legal transition away.
    /// - Throws: ``LifeCycleError`` when the transition is illegal or refused.
    public func transition(to target: LifeCycleState) async throws {
        try await machine.serially { [self] in try await step(to: target) }
    }

    /// Moves to `target` through the legal transitions, as one request: launching (from the
    /// saved state) when not running, resuming when suspended (a unit resumed on its way to
    /// the foreground is not told `didEnterBackground`). It never terminates on the way.
    ///
    /// - Parameter target: the state to reach.
    /// - Throws: ``LifeCycleError`` when a step is illegal or refused: the launch failed, the
    ///   unit cannot be suspended yet, or a callback of the unit asked for it (re-entrant).
    public func advance(to target: LifeCycleState) async throws {
        try await machine.serially { [self] in
            while machine.current != target {
                guard let next = LifeCycleTransition.path(from: machine.current, to: target).first else {
                    throw LifeCycleError.illegalTransition(subject: machine.subject, from: machine.current, to: target)
                }
                try await step(to: next, onTheWayTo: target)
            }
        }
    }

    /// One transition, inside the machine's serial order, as a step on the way to `destination`.
    func step(to target: LifeCycleState, onTheWayTo destination: LifeCycleState? = nil) async throws {
        // Refused before anything runs: a refused launch makes no delegate.
        _ = try machine.legalTransition(to: target, hooks: hooks)
        let launching = machine.current == .notRunning && target != .notRunning
        let restoring = storage.withLock { $0.launchCount > 0 }
        if launching {
            let delegate: any LifeCycleDelegate<LifeCycleUnit>
            do {
                delegate = try await makeDelegate(self)
            } catch {
                throw LifeCycleError.launchFailed(subject: machine.subject, reason: "making the delegate failed: \(error)")
            }
            storage.withLock { $0.delegate = delegate }
        }
        do {
            try await machine.perform(to: target, restoring: restoring, onTheWayTo: destination, hooks: hooks)
        } catch let error as LifeCycleError {
            if error.code == .launchFailed { relinquish() }
            throw error
        }
        if launching { storage.withLock { $0.launchCount += 1 } }
    }

    var hooks: LifeCycleMachine.Hooks {
        LifeCycleMachine.Hooks(
            check: { [self] transition in
                guard transition.to == .suspended else { return }
                let (saved, tasks) = storage.withLock { ($0.saved, $0.tasks.count) }
                guard saved else { throw LifeCycleError.stateNotSaved(unit: id) }
                guard tasks == 0 else { throw LifeCycleError.backgroundTasksRunning(unit: id, count: tasks) }
            },
            deliver: { [self] callback, restoring in await deliver(callback, restoring: restoring) },
            stateWillChange: { [self] transition in stateWillChange(transition) },
            transitionDidFinish: { [self] transition, outcomes in await transitionDidFinish(transition, outcomes) }
        )
    }

    private func deliver(_ callback: LifeCycleCallback, restoring: Bool) async -> HandlerOutcome {
        guard let delegate = storage.withLock({ $0.delegate }) else { return .completed }
        return await machine.runDelegateCallback(deadline: configuration.deadline(for: callback)) {
            try await delegate.deliver(callback, to: self, restoring: restoring)
        }
    }

    /// Under the machine's lock, as the state changes.
    private func stateWillChange(_ transition: LifeCycleTransition) {
        let consumers = storage.withLock { storage in
            storage.suspensionTimer?.cancel()
            storage.suspensionTimer = nil
            if transition.to == .background {
                storage.backgroundTimeEnds = .now + configuration.backgroundTaskTime
            } else if transition.from == .background {
                storage.expiryTimer?.cancel()
                storage.expiryTimer = nil
                if transition.to != .suspended { storage.backgroundTimeEnds = nil }
            }
            if transition.from == .background && transition.to == .inactive { storage.saved = false }
            return Array(storage.consumers.values)
        }
        if transition.to == .suspended {
            for consumer in consumers { coordinator.unregister(consumer) }
            coordinator.register(self)
        } else if transition.from == .suspended {
            coordinator.unregister(self)
            if transition.to != .notRunning { for consumer in consumers { coordinator.register(consumer) } }
        }
    }

    private func transitionDidFinish(_ transition: LifeCycleTransition, _ outcomes: [LifeCycleCallback: HandlerOutcome]) async {
        switch transition.to {
        case .background:
            // Told didEnterBackground (left the foreground, launched into the background, or
            // resumed to run there): saved only if it completed. Resumed on the way to the
            // foreground it was not told, and keeps what it saved before it was suspended.
            if let outcome = outcomes[.didEnterBackground] {
                let saved = outcome == .completed
                storage.withLock { $0.saved = saved }
                if !saved {
                    logger.warning(
                        "didEnterBackground did not complete; the unit stays in the background, unsaved, and is not suspended",
                        metadata: ["outcome": "\(outcome)"])
                }
                closeIdleHandles()
            }
            scheduleBackgroundTimeExpiry()
            scheduleSuspensionIfIdle()
        case .notRunning:
            relinquish()
        default:
            break
        }
    }

    private func closeIdleHandles() {
        let closers = storage.withLock { Array($0.idleClosers.values) }
        guard !closers.isEmpty else { return }
        var closed = 0
        var failures = 0
        for closer in closers {
            let result = closer.closeIdle()
            closed += result.closed
            failures += result.failures.count
            for failure in result.failures { logger.error("closing an idle handle failed", metadata: ["error": "\(failure)"]) }
        }
        machine.post(.closedIdleHandles(count: closed, failures: failures))
    }

    /// Suspends the unit after the suspension delay if it is then still in the background,
    /// saved, and without background tasks.
    func scheduleSuspensionIfIdle() {
        let delay = configuration.suspensionDelay
        // Detached: the timer must not inherit the transition it may be started from (it
        // would be refused as re-entrant), nor its priority.
        let timer = Task.detached { [weak self] in
            try? await Task.sleep(for: delay)
            guard !Task.isCancelled, let self else { return }
            do {
                try await machine.serially { [self] in
                    guard machine.current == .background, storage.withLock({ $0.saved && $0.tasks.isEmpty }) else { return }
                    try await machine.perform(to: .suspended, hooks: hooks)
                }
            } catch {
                logger.debug("suspension skipped", metadata: ["reason": "\(error)"])
            }
        }
        storage.withLock { storage in
            storage.suspensionTimer?.cancel()
            storage.suspensionTimer = timer
        }
    }

    /// Releases and unregisters the consumers and drops the delegate: the unit is not running.
    /// - Returns: the bytes the consumers freed.
    @discardableResult
    func relinquish() -> Int {
        let (consumers, delegate) = storage.withLock { storage in
            defer {
                storage.consumers = [:]
                storage.owners = [:]
                storage.idleClosers = [:]
                storage.delegate = nil
                storage.tasks = [:]
                storage.saved = false
                storage.backgroundTimeEnds = nil
                storage.suspensionTimer?.cancel()
                storage.expiryTimer?.cancel()
            }
            return (Array(storage.consumers.values), storage.delegate)
        }
        var freed = 0
        for consumer in consumers.sorted(by: { $0.footprintBytes > $1.footprintBytes }) {
            freed += consumer.release(ReleaseRequest(level: .critical, tier: consumer.tier, targetBytes: .max))
            coordinator.unregister(consumer)
        }
        withExtendedLifetime(delegate) {}  // dropped here, after its consumers let go
        return freed
    }
}

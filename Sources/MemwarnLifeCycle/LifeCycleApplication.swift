public import Logging
public import MemwarnRelease
import MemwarnSystem

/// The process's life cycle and its units: `UIApplication` for a Linux service.
///
/// The application has the five states itself (``launch()`` takes it to active) and keeps a
/// registry of units, made by the delegate factory given at init. ``activateUnit(_:)`` asks for
/// a unit: it is launched, resumed or — after it was terminated to free memory — relaunched
/// from its saved state. ``terminate()`` (SIGTERM/SIGINT through a `ServiceGroup`, see
/// `LifeCycleApplication+Service.swift`) tells running units `willTerminate` under a deadline.
///
/// ```swift
/// let app = LifeCycleApplication { unit in SessionDelegate(id: unit.id) }
/// try await app.launch()
/// let session = try await app.activateUnit("alice")
/// try await app.moveUnitToBackground("alice")   // saves; suspended once idle
/// ```
public final class LifeCycleApplication: Sendable {
    private struct Registry {
        var units: [LifeCycleUnit.ID: LifeCycleUnit] = [:]
        var terminated = false
    }

    /// The deadlines and delays units run with.
    public let configuration: LifeCycleConfiguration
    /// The coordinator units and their consumers register with.
    public let coordinator: ReleaseCoordinator
    let logger: Logger
    let machine: LifeCycleMachine
    let broadcaster = Broadcaster<LifeCycleNotification>()
    let delegate: (any LifeCycleDelegate<LifeCycleApplication>)?
    private let makeUnitDelegate: LifeCycleUnit.DelegateFactory
    private let registry = Locked(Registry())

    /// Creates an application (not running until ``launch()``).
    ///
    /// - Parameters:
    ///   - configuration: deadlines and delays.
    ///   - coordinator: where units register (suspended units in tier
    ///     `ReleaseTier.suspendedUnits`); attach it to a `PressureMonitor` so `.critical`
    ///     terminates suspended units.
    ///   - logger: the caller's logger.
    ///   - delegate: told of the application's own life cycle.
    ///   - makeUnitDelegate: makes a unit's delegate at each launch and relaunch.
    public init(
        configuration: LifeCycleConfiguration = .init(), coordinator: ReleaseCoordinator = .shared,
        logger: Logger = Logger(label: "memwarn.lifecycle"), delegate: (any LifeCycleDelegate<LifeCycleApplication>)? = nil,
        makeUnitDelegate: @escaping LifeCycleUnit.DelegateFactory
    ) {
        self.configuration = configuration
        self.coordinator = coordinator
        self.logger = logger
        self.delegate = delegate
        self.makeUnitDelegate = makeUnitDelegate
        machine = LifeCycleMachine(subject: .application, broadcaster: broadcaster)
    }

    /// The application's own state.
    public var state: LifeCycleState { machine.current }

    /// Every life-cycle notification, of the application and of every unit, from now on, in
    /// the order they happen; the stream ends when the application terminates.
    ///
    /// - Returns: a stream of the notifications posted after this call.
    public func notifications() -> AsyncStream<LifeCycleNotification> { broadcaster.stream() }

    /// Calls `observer` with every notification, on the task that caused it: return quickly.
    ///
    /// - Parameter observer: called with each notification, of the application and of every
    ///   unit.
    /// - Returns: a token for ``removeObserver(_:)``.
    @discardableResult
    public func addObserver(_ observer: @escaping @Sendable (LifeCycleNotification) -> Void) -> ObserverToken {
        ObserverToken(id: broadcaster.addObserver(observer))
    }

    /// Stops calling an observer.
    ///
    /// - Parameter token: what ``addObserver(_:)`` returned.
    public func removeObserver(_ token: ObserverToken) { broadcaster.removeObserver(token.id) }

    /// Identifies an observer.
    public struct ObserverToken: Sendable, Hashable { let id: Int }

    /// Launches the application into the foreground and makes it active.
    ///
    /// - Throws: ``LifeCycleError`` when the application has terminated, when its delegate's
    ///   `willFinishLaunching` threw (``LifeCycleError/Code/launchFailed``), or
    ///   when a callback of the application asked for it (re-entrant).
    public func launch() async throws { try await advance(to: .active) }

    /// Performs one legal transition of the application (see ``LifeCycleTransition``).
    ///
    /// - Parameter target: the state to move to, one legal transition away.
    /// - Throws: ``LifeCycleError`` when the transition is illegal, the application has
    ///   terminated, the launch failed, or a callback asked for it (re-entrant).
    public func transition(to target: LifeCycleState) async throws {
        try checkNotTerminated()
        try await machine.serially { [self] in try await machine.perform(to: target, hooks: hooks) }
    }

    /// Moves the application to `target` through the legal transitions.
    ///
    /// - Parameter target: the state to reach.
    /// - Throws: ``LifeCycleError`` when a step is refused: the application has terminated,
    ///   the launch failed, or a callback asked for it (re-entrant).
    public func advance(to target: LifeCycleState) async throws {
        try checkNotTerminated()
        try await machine.serially { [self] in
            for next in LifeCycleTransition.path(from: machine.current, to: target) {
                try await machine.perform(to: next, onTheWayTo: target, hooks: hooks)
            }
        }
    }

    var hooks: LifeCycleMachine.Hooks {
        LifeCycleMachine.Hooks(deliver: { [self] callback, restoring in
            guard let delegate else { return .completed }
            return await machine.runDelegateCallback(deadline: configuration.deadline(for: callback)) {
                try await delegate.deliver(callback, to: self, restoring: restoring)
            }
        })
    }

    func checkNotTerminated() throws {
        if registry.withLock({ $0.terminated }) { throw LifeCycleError.applicationTerminated() }
    }

    /// Marks the application terminated; returns whether it already was.
    func registry(markingTerminated: Bool) -> Bool {
        registry.withLock { registry in
            defer { if markingTerminated { registry.terminated = true } }
            return registry.terminated
        }
    }

    // MARK: Units

    /// Every unit ever asked for (terminated ones included: they relaunch when asked again).
    public var units: [LifeCycleUnit] { registry.withLock { Array($0.units.values) }.sorted { $0.id < $1.id } }

    /// The unit with this identifier, whatever its state, or `nil` if it was never asked for.
    ///
    /// - Parameter id: the unit's identifier.
    /// - Returns: the unit, or `nil`.
    public func unit(_ id: LifeCycleUnit.ID) -> LifeCycleUnit? { registry.withLock { $0.units[id] } }

    /// The units terminated while suspended and not relaunched since.
    public var discardedUnits: [LifeCycleUnit.ID] {
        units.filter { $0.state == .notRunning && $0.discardCount > 0 }.map(\.id)
    }

    /// The unit for `id`, made (not running) if it does not exist yet.
    ///
    /// - Parameter id: the unit's identifier.
    /// - Returns: the unit, existing or new.
    /// - Throws: ``LifeCycleError/Code/applicationTerminated`` once the application has terminated.
    public func makeUnit(_ id: LifeCycleUnit.ID) throws -> LifeCycleUnit {
        try checkNotTerminated()
        return registry.withLock { registry in
            if let unit = registry.units[id] { return unit }
            let unit = LifeCycleUnit(
                id: id, broadcaster: broadcaster, configuration: configuration, coordinator: coordinator,
                logger: logger, makeDelegate: makeUnitDelegate)
            registry.units[id] = unit
            return unit
        }
    }

    /// Asks for a unit: makes it active, launching it (from its saved state, if it ran
    /// before and was terminated) or resuming it as needed.
    ///
    /// - Parameter id: the unit's identifier.
    /// - Returns: the unit, now active.
    /// - Throws: ``LifeCycleError`` when the application has terminated, the unit's launch
    ///   failed (its delegate factory or `willFinishLaunching` threw), or a callback of the unit
    ///   asked for it (re-entrant).
    @discardableResult
    public func activateUnit(_ id: LifeCycleUnit.ID) async throws -> LifeCycleUnit {
        let unit = try makeUnit(id)
        try await unit.advance(to: .active)
        return unit
    }

    /// Moves a running unit to the background: it resigns active, saves in
    /// `didEnterBackground`, closes its idle handles, and is suspended once idle.
    ///
    /// - Parameter id: the unit's identifier.
    /// - Returns: the unit, now in the background.
    /// - Throws: ``LifeCycleError/Code/unknownUnit`` when no unit has this identifier, or another
    ///   ``LifeCycleError`` when the move is refused (its relaunch failed, or a callback of the
    ///   unit asked for it).
    @discardableResult
    public func moveUnitToBackground(_ id: LifeCycleUnit.ID) async throws -> LifeCycleUnit {
        guard let unit = unit(id) else { throw LifeCycleError.unknownUnit(id) }
        try await unit.advance(to: .background)
        return unit
    }

    /// Terminates suspended units, largest footprint first, until `targetBytes` are freed:
    /// what `.critical` pressure does through the coordinator, on request.
    ///
    /// - Parameter targetBytes: the bytes to free; by default every suspended unit goes.
    /// - Returns: the coordinator's report (one entry per unit asked).
    @discardableResult
    public func terminateSuspendedUnits(targetBytes: Int = .max) -> ReleaseReport {
        coordinator.release(level: .critical, targetBytes: targetBytes, tiers: [.suspendedUnits])
    }
}

import Logging
import Memwarn
import MemwarnSystem
import MemwarnTestKit
import Testing

@testable import MemwarnLifeCycle

/// A delegate that records every callback with the state its subject was in at the time,
/// and can be told to misbehave.
final class Recorder<Subject: AnyObject & Sendable>: LifeCycleDelegate, Sendable {
    struct Call: Sendable, Equatable, CustomStringConvertible {
        var callback: LifeCycleCallback
        var state: LifeCycleState
        var restoring: Bool
        var description: String { "\(callback)@\(state)\(restoring ? " restoring" : "")" }
    }

    enum Behaviour: Sendable {
        case completes
        case throwsError
        /// Runs until the test is over (its application is gone), at most a minute, ignoring
        /// cancellation.
        case overruns
    }

    struct Failure: Error, CustomStringConvertible { var description: String { "the recorder was told to fail" } }

    private let state: @Sendable (Subject) -> LifeCycleState
    private let recorded = Locked<[Call]>([])
    private let behaviours: Locked<[LifeCycleCallback: Behaviour]>
    /// Runs inside every callback (after recording it).
    let during = Locked<(@Sendable (LifeCycleCallback, Subject) async -> Void)?>(nil)
    /// Opened when the test is over: the handlers that overrun end.
    private let overrunsEnd = AsyncCondition<Bool>()

    init(behaviours: [LifeCycleCallback: Behaviour] = [:], state: @escaping @Sendable (Subject) -> LifeCycleState) {
        self.behaviours = Locked(behaviours)
        self.state = state
    }

    var calls: [Call] { recorded.withLock { $0 } }
    var callbacks: [LifeCycleCallback] { calls.map(\.callback) }
    func clear() { recorded.withLock { $0 = [] } }
    func set(_ callback: LifeCycleCallback, _ behaviour: Behaviour) { behaviours.withLock { $0[callback] = behaviour } }
    /// Lets the handlers that overrun end.
    func endOverruns() { overrunsEnd.open() }

    private func record(_ callback: LifeCycleCallback, _ subject: Subject, restoring: Bool = false) async throws {
        recorded.withLock { $0.append(Call(callback: callback, state: state(subject), restoring: restoring)) }
        if let during = during.withLock({ $0 }) { await during(callback, subject) }
        switch behaviours.withLock({ $0[callback] }) ?? .completes {
        case .completes: return
        case .throwsError: throw Failure()
        case .overruns:
            await overrunsEnd.wait(within: .seconds(60))  // not ended by cancellation
        }
    }

    func willFinishLaunching(_ subject: Subject, restoring: Bool) async throws { try await record(.willFinishLaunching, subject, restoring: restoring) }
    func didFinishLaunching(_ subject: Subject) async { try? await record(.didFinishLaunching, subject) }
    func willResignActive(_ subject: Subject) async { try? await record(.willResignActive, subject) }
    func didEnterBackground(_ subject: Subject) async throws { try await record(.didEnterBackground, subject) }
    func willEnterForeground(_ subject: Subject) async { try? await record(.willEnterForeground, subject) }
    func didBecomeActive(_ subject: Subject) async { try? await record(.didBecomeActive, subject) }
    func willTerminate(_ subject: Subject) async { try? await record(.willTerminate, subject) }
    func didReceiveMemoryWarning(_ subject: Subject, level: MemoryPressureLevel) async {
        warningLevels.withLock { $0.append(level) }
        try? await record(.didReceiveMemoryWarning, subject)
    }

    /// The levels of the memory warnings delivered, in order.
    let warningLevels = Locked<[MemoryPressureLevel]>([])
}

/// An application whose units are recorded, each with its own recorder.
final class RecordedApplication: Sendable {
    let app: LifeCycleApplication
    let appRecorder = Recorder<LifeCycleApplication> { $0.state }
    private let recorders = Locked<[String: [Recorder<LifeCycleUnit>]]>([:])
    private let behaviours = Locked<[LifeCycleCallback: Recorder<LifeCycleUnit>.Behaviour]>([:])

    /// Units never suspend on their own unless `suspensionDelay` is given.
    init(
        configuration: LifeCycleConfiguration = LifeCycleConfiguration(suspensionDelay: .seconds(3_600)),
        coordinator: ReleaseCoordinator = ReleaseCoordinator(trimsHeap: false),
        unitBehaviours: [LifeCycleCallback: Recorder<LifeCycleUnit>.Behaviour] = [:]
    ) {
        behaviours.withLock { $0 = unitBehaviours }
        var logger = Logger(label: "memwarn-lifecycle-tests")
        logger.logLevel = .critical
        let recorders = self.recorders
        let behaviours = self.behaviours
        let appRecorder = self.appRecorder
        app = LifeCycleApplication(configuration: configuration, coordinator: coordinator, logger: logger, delegate: appRecorder) { unit in
            let recorder = Recorder<LifeCycleUnit>(behaviours: behaviours.withLock { $0 }) { $0.state }
            recorders.withLock { $0[unit.id, default: []].append(recorder) }
            return recorder
        }
    }

    /// The test is over: the handlers that overrun end (rather than a minute on, in the next tests' time).
    deinit {
        appRecorder.endOverruns()
        for recorder in recorders.withLock({ $0.values.flatMap { $0 } }) { recorder.endOverruns() }
    }

    func setUnitBehaviour(_ callback: LifeCycleCallback, _ behaviour: Recorder<LifeCycleUnit>.Behaviour) {
        behaviours.withLock { $0[callback] = behaviour }
        for recorder in recorders.withLock({ $0.values.flatMap { $0 } }) { recorder.set(callback, behaviour) }
    }

    /// The recorder of a unit's latest launch.
    func recorder(_ id: String) -> Recorder<LifeCycleUnit>? { recorders.withLock { $0[id]?.last } }
    /// How many delegates were made for a unit (one per launch).
    func launches(_ id: String) -> Int { recorders.withLock { $0[id]?.count ?? 0 } }
}

/// Collects notifications (through an observer) from the moment it is made, and lets a test
/// wait for one.
final class NotificationLog: Sendable {
    private let seen = AsyncCondition<[LifeCycleNotification]>([])

    init(_ app: LifeCycleApplication) {
        app.addObserver { [seen] notification in seen.withLock { $0.append(notification) } }
    }

    /// Every notification so far.
    var notifications: [LifeCycleNotification] { seen.withLock { $0 } }

    /// The first notification so far, or from now on, that matches; waits at most `limit`
    /// (a bound against a hang, not a measurement).
    @discardableResult
    func wait(
        for what: String, within limit: Duration = .seconds(10),
        _ matches: @escaping @Sendable (LifeCycleNotification) -> Bool
    ) async throws -> LifeCycleNotification {
        guard let found = await seen.wait(within: limit, until: { $0.first(where: matches) }) else {
            throw WaitTimedOut(description: "no notification \(what) within \(limit); seen: \(notifications.map(\.description))")
        }
        return found
    }

    struct WaitTimedOut: Error, CustomStringConvertible { var description: String }
}

extension LifeCycleNotification {
    func isStateChange(of subject: LifeCycleSubject, to state: LifeCycleState) -> Bool {
        guard self.subject == subject, case .stateChanged(_, let to) = event else { return false }
        return to == state
    }
}

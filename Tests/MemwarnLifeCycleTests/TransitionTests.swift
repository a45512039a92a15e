import Testing

@testable import MemwarnLifeCycle

/// Every pair of states, for a unit and for the application: each legal transition delivers
/// its callbacks in the documented order, in the documented state, with the notifications in
/// the same order; each illegal one is refused with a clear error and changes nothing.
@Suite("Life-cycle transitions")
struct TransitionTests {
    static let states = LifeCycleState.allCases

    @Test("a unit", arguments: states, states)
    func unitTransition(from: LifeCycleState, to: LifeCycleState) async throws {
        let recorded = RecordedApplication()
        let unit = try recorded.app.makeUnit("u")
        try await unit.advance(to: from)
        #expect(unit.state == from)
        recorded.recorder("u")?.clear()
        let log = NotificationLog(recorded.app)

        guard let transition = LifeCycleTransition.between(from, to) else {
            await #expect(throws: LifeCycleError.illegalTransition(subject: .unit("u"), from: from, to: to)) {
                try await unit.transition(to: to)
            }
            #expect(unit.state == from, "an illegal transition changes nothing")
            #expect(recorded.recorder("u")?.calls ?? [] == [])
            #expect(log.notifications.isEmpty)
            return
        }
        try await unit.transition(to: to)
        #expect(unit.state == to)
        let calls = try #require(recorded.recorder("u")).calls
        #expect(calls.map(\.callback) == transition.callbacks)
        Self.expectCallbacksRanInTheDocumentedStates(calls.map { ($0.callback, $0.state) }, transition)
        Self.expectNotificationsInOrder(log.notifications, of: .unit("u"), transition)
    }

    @Test("the application", arguments: states, states)
    func applicationTransition(from: LifeCycleState, to: LifeCycleState) async throws {
        let recorded = RecordedApplication()
        let app = recorded.app
        try await app.advance(to: from)
        #expect(app.state == from)
        recorded.appRecorder.clear()
        let log = NotificationLog(app)

        guard let transition = LifeCycleTransition.between(from, to) else {
            await #expect(throws: LifeCycleError.illegalTransition(subject: .application, from: from, to: to)) {
                try await app.transition(to: to)
            }
            #expect(app.state == from)
            #expect(recorded.appRecorder.calls.isEmpty)
            #expect(log.notifications.isEmpty)
            return
        }
        try await app.transition(to: to)
        #expect(app.state == to)
        #expect(recorded.appRecorder.callbacks == transition.callbacks)
        Self.expectCallbacksRanInTheDocumentedStates(recorded.appRecorder.calls.map { ($0.callback, $0.state) }, transition)
        Self.expectNotificationsInOrder(log.notifications, of: .application, transition)
    }

    /// `will…` callbacks run in the state being left, `did…` in the state entered.
    static func expectCallbacksRanInTheDocumentedStates(_ calls: [(LifeCycleCallback, LifeCycleState)], _ transition: LifeCycleTransition) {
        for (callback, state) in calls {
            #expect(state == (callback.runsBeforeTheStateChanges ? transition.from : transition.to), "\(callback) ran in \(state)")
        }
    }

    /// The notifications: each callback run before the state changes, the state change, each
    /// callback run after it — each posted once its method returned.
    static func expectNotificationsInOrder(_ notifications: [LifeCycleNotification], of subject: LifeCycleSubject, _ transition: LifeCycleTransition) {
        let expected: [LifeCycleNotification.Event] =
            transition.callbacks.filter(\.runsBeforeTheStateChanges).map { .callback($0) }
            + [.stateChanged(from: transition.from, to: transition.to)]
            + transition.callbacks.filter { !$0.runsBeforeTheStateChanges }.map { .callback($0) }
        #expect(notifications.filter { $0.subject == subject }.map(\.event) == expected)
    }

    /// The transitions and callbacks as Apple documents them for apps and scenes (the seeds'
    /// "Managing Your App's Life Cycle" and `UIApplicationDelegate`), written out here apart
    /// from the library's table, which the tests above follow.
    static let documented: [String: [LifeCycleCallback]] = [
        "not-running→inactive": [.willFinishLaunching, .didFinishLaunching],
        // "The system launches the app and follows the initialization sequence … UIKit calls
        // the app delegate's applicationDidEnterBackground(_:) method."
        "not-running→background": [.willFinishLaunching, .didFinishLaunching, .didEnterBackground],
        "inactive→active": [.didBecomeActive],
        "active→inactive": [.willResignActive],
        "inactive→background": [.didEnterBackground],
        "background→inactive": [.willEnterForeground],
        "background→suspended": [],
        // "The system resumes the app. UIKit calls the app delegate's
        // applicationDidEnterBackground(_:) method." (Not on the way to the foreground.)
        "suspended→background": [.didEnterBackground],
        "inactive→not-running": [.willTerminate],
        "active→not-running": [.willTerminate],
        "background→not-running": [.willTerminate],
        "suspended→not-running": [],
    ]

    @Test func theLibrarysTableIsTheDocumentedOne() {
        let table = Dictionary(LifeCycleTransition.all.map { ("\($0.from)→\($0.to)", $0.callbacks) }, uniquingKeysWith: { first, _ in first })
        #expect(LifeCycleTransition.all.count == table.count, "no transition is listed twice")
        #expect(table == Self.documented)
        #expect(LifeCycleCallback.allCases.filter(\.runsBeforeTheStateChanges) == [.willResignActive, .willEnterForeground, .willTerminate])
        #expect(!LifeCycleTransition.all.contains { $0.callbacks.contains(.didReceiveMemoryWarning) }, "a memory warning is no transition")
    }

    @Test func aPathNeverTerminatesOnTheWayAndSuspendedResumesThroughTheBackground() {
        #expect(LifeCycleTransition.path(from: .suspended, to: .active) == [.background, .inactive, .active])
        #expect(LifeCycleTransition.path(from: .notRunning, to: .active) == [.inactive, .active])
        #expect(LifeCycleTransition.path(from: .active, to: .suspended) == [.inactive, .background, .suspended])
        #expect(LifeCycleTransition.path(from: .active, to: .notRunning) == [.notRunning])
        #expect(LifeCycleTransition.path(from: .active, to: .active) == [])
    }

    @Test func theIllegalTransitionErrorNamesTheLegalWays() {
        let error = LifeCycleError.illegalTransition(subject: .unit("alice"), from: .active, to: .background)
        #expect(error.description == "unit alice: illegal transition active → background; from active the legal ones go to inactive, not-running")
    }
}

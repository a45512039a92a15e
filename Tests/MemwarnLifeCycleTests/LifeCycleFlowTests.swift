import Memwarn
import MemwarnSystem
import MemwarnTestKit
import Testing

@testable import MemwarnLifeCycle

/// The life cycle as a service drives it: launch, background, suspension, resumption, and
/// the errors for what may not happen.
@Suite("Life-cycle flows")
struct LifeCycleFlowTests {
    @Test func activatingANewUnitLaunchesItIntoTheForegroundThenMakesItActive() async throws {
        let recorded = RecordedApplication()
        let unit = try await recorded.app.activateUnit("alice")
        #expect(unit.state == .active)
        #expect(
            recorded.recorder("alice")?.calls.map(\.description) == [
                "willFinishLaunching@inactive", "didFinishLaunching@inactive", "didBecomeActive@active",
            ])
        #expect(unit.launchCount == 1)
    }

    @Test func movingToTheBackgroundResignsSavesAndThenSuspendsOnItsOwn() async throws {
        let recorded = RecordedApplication(configuration: LifeCycleConfiguration(suspensionDelay: .milliseconds(20)))
        let log = NotificationLog(recorded.app)
        try await recorded.app.activateUnit("alice")
        try await recorded.app.moveUnitToBackground("alice")
        #expect(recorded.recorder("alice")?.callbacks.suffix(2) == [.willResignActive, .didEnterBackground])
        try await log.wait(for: "alice suspended") { $0.isStateChange(of: .unit("alice"), to: .suspended) }
        let unit = try #require(recorded.app.unit("alice"))
        #expect(unit.state == .suspended)
        #expect(unit.isStateSaved)
        #expect(recorded.recorder("alice")?.callbacks.count == 5, "suspension delivers no callback")
    }

    @Test func aSuspendedUnitAskedForAgainResumesThroughTheBackgroundWithoutRelaunching() async throws {
        let recorded = RecordedApplication()
        let unit = try recorded.app.makeUnit("bob")
        try await unit.advance(to: .suspended)
        recorded.recorder("bob")?.clear()
        let log = NotificationLog(recorded.app)
        try await recorded.app.activateUnit("bob")
        #expect(unit.state == .active)
        #expect(recorded.recorder("bob")?.callbacks == [.willEnterForeground, .didBecomeActive])
        #expect(recorded.launches("bob") == 1)
        let changes = log.notifications.compactMap { notification -> String? in
            guard case .stateChanged(let from, let to) = notification.event else { return nil }
            return "\(from)→\(to)"
        }
        #expect(changes == ["suspended→background", "background→inactive", "inactive→active"])
        #expect(!unit.isStateSaved, "back in the foreground, the next background must save again")
    }

    @Test func aUnitWhoseSaveThrowsStaysInTheBackgroundUnsavedAndCannotBeSuspended() async throws {
        let recorded = RecordedApplication(unitBehaviours: [.didEnterBackground: .throwsError])
        let log = NotificationLog(recorded.app)
        try await recorded.app.activateUnit("carol")
        try await recorded.app.moveUnitToBackground("carol")
        let unit = try #require(recorded.app.unit("carol"))
        #expect(unit.state == .background)
        #expect(!unit.isStateSaved)
        #expect(log.notifications.contains { $0.event == .handler(.didEnterBackground, .failed(reason: "the recorder was told to fail")) })
        await #expect(throws: LifeCycleError.stateNotSaved(unit: "carol")) { try await unit.transition(to: .suspended) }
    }

    @Test func aSaveThatOverrunsItsDeadlineIsCutOffReportedAndLeavesTheUnitUnsaved() async throws {
        let recorded = RecordedApplication(
            configuration: LifeCycleConfiguration(backgroundHandlerDeadline: .milliseconds(50), suspensionDelay: .milliseconds(10)),
            unitBehaviours: [.didEnterBackground: .overruns])
        let log = NotificationLog(recorded.app)
        try await recorded.app.activateUnit("dave")
        try await recorded.app.moveUnitToBackground("dave")  // returns at the deadline, not after the handler's minute
        let unit = try #require(recorded.app.unit("dave"))
        #expect(unit.state == .background)
        #expect(!unit.isStateSaved)
        #expect(log.notifications.contains { $0.event == .handler(.didEnterBackground, .overran(deadline: .milliseconds(50))) })
        await #expect(throws: LifeCycleError.stateNotSaved(unit: "dave")) { try await unit.transition(to: .suspended) }
    }

    @Test func aLaunchWhoseWillFinishLaunchingThrowsIsAbandonedAndCanBeRetried() async throws {
        let recorded = RecordedApplication(unitBehaviours: [.willFinishLaunching: .throwsError])
        await #expect(throws: LifeCycleError.self) { try await recorded.app.activateUnit("erin") }
        let unit = try #require(recorded.app.unit("erin"))
        #expect(unit.state == .notRunning)
        #expect(unit.launchCount == 0)
        #expect(unit.delegate == nil, "an abandoned launch leaves no delegate")
        recorded.setUnitBehaviour(.willFinishLaunching, .completes)
        try await recorded.app.activateUnit("erin")
        #expect(unit.state == .active)
        #expect(recorded.recorder("erin")?.calls.first?.restoring == false, "a launch that never completed restores nothing")
    }

    @Test func aCallbackAskingForItsOwnTransitionIsRefusedNotDeadlocked() async throws {
        let recorded = RecordedApplication()
        let unit = try recorded.app.makeUnit("frank")
        let refusal = Locked<(any Error)?>(nil)
        try await unit.advance(to: .inactive)
        recorded.recorder("frank")?.during.withLock { during in
            during = { callback, unit in
                guard callback == .didBecomeActive else { return }
                do { try await unit.transition(to: .inactive) } catch { refusal.withLock { $0 = error } }
            }
        }
        try await unit.transition(to: .active)
        #expect(unit.state == .active)
        #expect(refusal.withLock { $0 as? LifeCycleError } == .reentrantTransition(subject: .unit("frank")))
    }

    @Test func askingForAnUnknownUnitToGoToTheBackgroundIsAnError() async throws {
        let recorded = RecordedApplication()
        await #expect(throws: LifeCycleError.unknownUnit("nobody")) { try await recorded.app.moveUnitToBackground("nobody") }
    }

    @Test func enteringTheBackgroundClosesTheUnitsIdleHandles() async throws {
        let recorded = RecordedApplication()
        let log = NotificationLog(recorded.app)
        let closed = Locked(0)
        let pool = ResourcePool<Int>(
            name: "connections", bytesPerHandle: 1_000, maximumCount: 3, coordinator: recorded.app.coordinator,
            open: { 7 }, close: { _ in closed.withLock { $0 += 1 } })
        let unit = try await recorded.app.activateUnit("gina")
        unit.adopt(pool)
        let borrowing = AsyncCondition(0)
        try await withThrowingTaskGroup(of: Void.self) { group in  // three handles open at once, then idle
            for _ in 0..<3 {
                group.addTask {
                    try await pool.withResource { _ in
                        borrowing.withLock { $0 += 1 }
                        await borrowing.wait(within: .seconds(10), until: { $0 == 3 })  // each holds its handle until all three are out
                    }
                }
            }
            try await group.waitForAll()
        }
        #expect(pool.idleCount == 3)
        try await recorded.app.moveUnitToBackground("gina")
        #expect(pool.openCount == 0)
        #expect(closed.withLock { $0 } == 3)
        #expect(log.notifications.contains { $0.event == .closedIdleHandles(count: 3, failures: 0) })
    }

    @Test func terminateToldRunningUnitsNotSuspendedOnesThenTheApplicationAndEndsTheStreams() async throws {
        let recorded = RecordedApplication()
        let app = recorded.app
        try await app.launch()
        try await app.activateUnit("active")
        try await app.makeUnit("background").advance(to: .background)
        try await app.makeUnit("suspended").advance(to: .suspended)
        let stream = app.notifications()
        let report = await app.terminate()
        #expect(report.units["active"] == .told(.completed))
        #expect(report.units["background"] == .told(.completed))
        #expect(report.units["suspended"] == .suspendedNotTold)
        #expect(report.application == .told(.completed))
        #expect(recorded.recorder("active")?.callbacks.last == .willTerminate)
        #expect(recorded.recorder("background")?.callbacks.last == .willTerminate)
        #expect(recorded.recorder("suspended")?.callbacks.contains(.willTerminate) == false)
        #expect(recorded.appRecorder.callbacks.last == .willTerminate)
        var remaining = 0
        for await _ in stream { remaining += 1 }  // ends: the application terminated
        #expect(remaining > 0)
        await #expect(throws: LifeCycleError.applicationTerminated()) { try await app.activateUnit("late") }
    }

    @Test func aWillTerminateThatOverrunsIsCutOffAtTheDeadlineAndReported() async throws {
        // A deadline the quick handler meets even with the pool's threads busy with other suites
        // (50 ms was not, under the thread sanitizer); the slow one overruns any deadline.
        let recorded = RecordedApplication(configuration: LifeCycleConfiguration(terminationDeadline: .seconds(1)))
        try await recorded.app.activateUnit("slow")
        try await recorded.app.activateUnit("quick")
        recorded.recorder("slow")?.set(.willTerminate, .overruns)
        let report = await recorded.app.terminate()  // returns at the deadline, not after the handler's minute
        #expect(report.units["slow"] == .told(.overran(deadline: .seconds(1))))
        #expect(report.units["quick"] == .told(.completed))
        #expect(report.overran == [.unit("slow")])
    }
}

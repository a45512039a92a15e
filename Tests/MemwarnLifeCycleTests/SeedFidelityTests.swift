import Memwarn
import MemwarnSystem
import MemwarnTestKit
import Testing

@testable import MemwarnLifeCycle

/// The life cycle held against the seeds' own sentences (`../shared/seeds`: Apple's "Managing
/// Your App's Life Cycle", "About the App Launch Sequence", "Handle Background Events", the
/// `UIApplicationDelegate` reference, and its summaries), one departure from UIKit at a time.
@Suite("Life cycle, as the seeds say")
struct SeedFidelityTests {
    // MARK: 1. Notifications after their methods

    @Test("\"After calling this method, the app also posts UIApplicationDidBecomeActiveNotification\": every notification comes after its method returned")
    func eachNotificationIsPostedAfterItsMethodReturned() async throws {
        let recorded = RecordedApplication()
        let log = NotificationLog(recorded.app)
        let postedBeforeReturn = Locked<[LifeCycleCallback]>([])
        let recorder = recorded.appRecorder
        recorder.during.withLock { during in
            during = { callback, _ in
                // The method is recorded as it starts: its own notification must not be out yet.
                let calls = recorder.callbacks.filter { $0 == callback }.count
                let posted = log.notifications.filter { $0.subject == .application && $0.event == .callback(callback) }.count
                if posted >= calls { postedBeforeReturn.withLock { $0.append(callback) } }
            }
        }
        try await recorded.app.launch()
        try await recorded.app.advance(to: .background)
        try await recorded.app.advance(to: .active)
        _ = await recorded.app.terminate()

        let delivered = recorded.appRecorder.callbacks
        #expect(
            delivered == [
                .willFinishLaunching, .didFinishLaunching, .didBecomeActive, .willResignActive, .didEnterBackground,
                .willEnterForeground, .didBecomeActive, .willTerminate,
            ])
        #expect(postedBeforeReturn.withLock { $0 }.isEmpty, "posted while its method still ran: \(postedBeforeReturn.withLock { $0 })")
        let posted = log.notifications.compactMap { notification -> LifeCycleCallback? in
            guard case .callback(let callback) = notification.event else { return nil }
            return callback
        }
        #expect(posted == delivered, "one notification per method, in the same order")
    }

    // MARK: 2. An expiration handler may end its own task

    @Test("Apple's sample: the expiration handler calls endBackgroundTask for its own task, which succeeds")
    func anExpirationHandlerEndsItsOwnTask() async throws {
        let recorded = RecordedApplication(
            configuration: LifeCycleConfiguration(
                suspensionDelay: .milliseconds(10),
                backgroundTaskTime: .milliseconds(50)))
        let log = NotificationLog(recorded.app)
        let unit = try await recorded.app.activateUnit("u")
        let identifier = Locked(BackgroundTaskIdentifier.invalid)
        let endedByHandler = Locked<Bool?>(nil)
        let task = unit.beginBackgroundTask(name: "Finish Network Tasks") {
            // "End the task if time expires."
            endedByHandler.withLock { $0 = unit.endBackgroundTask(identifier.withLock { $0 }) }
        }
        identifier.withLock { $0 = task }
        try await recorded.app.moveUnitToBackground("u")
        try await log.wait(for: "suspended after expiry") { $0.isStateChange(of: .unit("u"), to: .suspended) }

        #expect(endedByHandler.withLock { $0 } == true, "the task was still held while its handler ran")
        #expect(!log.notifications.contains { if case .misuse = $0.event { true } else { false } }, "no misuse reported")
        let taskEvents = log.notifications.map(\.event).filter {
            [
                .backgroundTaskBegan(task, name: "Finish Network Tasks"), .backgroundTaskExpired(task, name: "Finish Network Tasks"),
                .backgroundTaskEnded(task, name: "Finish Network Tasks"),
            ].contains($0)
        }
        #expect(
            taskEvents == [
                .backgroundTaskBegan(task, name: "Finish Network Tasks"), .backgroundTaskExpired(task, name: "Finish Network Tasks"),
                .backgroundTaskEnded(task, name: "Finish Network Tasks"),
            ], "ended once, by its handler")
    }

    // MARK: 3. A refused launch makes no delegate

    @Test(
        "\"delegate: nil while not running\": an illegal launch is refused before the delegate factory runs",
        arguments: [
            LifeCycleState.active, .suspended,
        ])
    func aRefusedLaunchMakesNoDelegate(target: LifeCycleState) async throws {
        let recorded = RecordedApplication()
        let unit = try recorded.app.makeUnit("u")
        await #expect(throws: LifeCycleError.illegalTransition(subject: .unit("u"), from: .notRunning, to: target)) {
            try await unit.transition(to: target)
        }
        #expect(recorded.launches("u") == 0, "the factory never ran")
        #expect(unit.delegate == nil)
        #expect(unit.state == .notRunning)
    }

    // MARK: 4 and 6. Launch into the background; the launch callbacks' state

    @Test(
        "\"If fore, this property contains UIApplicationStateInactive; if back, UIApplicationStateBackground\": the launch callbacks see the state launched into"
    )
    func theLaunchCallbacksRunInTheStateLaunchedInto() async throws {
        let recorded = RecordedApplication()
        try await recorded.app.makeUnit("fore").transition(to: .inactive)
        try await recorded.app.makeUnit("back").transition(to: .background)
        try await recorded.app.launch()
        #expect(recorded.recorder("fore")?.calls.map(\.description) == ["willFinishLaunching@inactive", "didFinishLaunching@inactive"])
        #expect(recorded.recorder("back")?.calls.prefix(2).map(\.description) == ["willFinishLaunching@background", "didFinishLaunching@background"])
        #expect(recorded.appRecorder.calls.first?.description == "willFinishLaunching@inactive")
    }

    @Test(
        "\"The system launches the app … UIKit calls the app delegate's applicationDidEnterBackground(_:) method. UIKit delivers the event that caused the launch. … The app may be suspended again.\""
    )
    func aLaunchIntoTheBackgroundCallsDidEnterBackgroundThenDeliversTheEventThenSuspends() async throws {
        let recorded = RecordedApplication(configuration: LifeCycleConfiguration(suspensionDelay: .milliseconds(10)))
        let log = NotificationLog(recorded.app)
        let seenByEvent = Locked<(state: LifeCycleState, tasks: [String], callbacks: [LifeCycleCallback])?>(nil)
        let answer = try await recorded.app.deliverBackgroundEvent(to: "u", name: "push") { unit in
            seenByEvent.withLock { $0 = (unit.state, Array(unit.backgroundTasks.values), recorded.recorder("u")?.callbacks ?? []) }
            return 42
        }
        #expect(answer == 42)
        let seen = try #require(seenByEvent.withLock { $0 })
        #expect(seen.callbacks == [.willFinishLaunching, .didFinishLaunching, .didEnterBackground], "launched, then told of the background, then the event")
        #expect(seen.state == .background)
        #expect(seen.tasks == ["push"], "the event ran under a background task")
        try await log.wait(for: "suspended again") { $0.isStateChange(of: .unit("u"), to: .suspended) }
        let unit = try #require(recorded.app.unit("u"))
        #expect(unit.isStateSaved)
        #expect(unit.backgroundTasks.isEmpty)
    }

    // MARK: 5. Resumed into the background

    @Test(
        "\"The system resumes the app. UIKit calls the app delegate's applicationDidEnterBackground(_:) method\", then the event, then it may be suspended again"
    )
    func aSuspendedUnitResumedForAnEventIsToldDidEnterBackgroundFirst() async throws {
        let recorded = RecordedApplication(configuration: LifeCycleConfiguration(suspensionDelay: .milliseconds(10)))
        let unit = try recorded.app.makeUnit("u")
        try await unit.advance(to: .suspended)
        let log = NotificationLog(recorded.app)  // from the resume on
        recorded.recorder("u")?.clear()
        let order = Locked<[String]>([])
        recorded.recorder("u")?.during.withLock { during in during = { callback, _ in order.withLock { $0.append("\(callback)") } } }

        try await recorded.app.deliverBackgroundEvent(to: "u") { _ in order.withLock { $0.append("event") } }
        #expect(order.withLock { $0 } == ["didEnterBackground", "event"])
        #expect(recorded.launches("u") == 1, "resumed, not relaunched")
        try await log.wait(for: "suspended again") { $0.isStateChange(of: .unit("u"), to: .suspended) }
        #expect(unit.state == .suspended)
    }

    @Test("A resume on the way to the foreground is willEnterForeground → didBecomeActive, without didEnterBackground; a resume to stay is told")
    func resumingToTheForegroundIsNotToldDidEnterBackground() async throws {
        let recorded = RecordedApplication()
        let going = try recorded.app.makeUnit("going")
        let staying = try recorded.app.makeUnit("staying")
        try await going.advance(to: .suspended)
        try await staying.advance(to: .suspended)
        recorded.recorder("going")?.clear()
        recorded.recorder("staying")?.clear()
        try await going.advance(to: .active)
        try await staying.transition(to: .background)
        #expect(recorded.recorder("going")?.callbacks == [.willEnterForeground, .didBecomeActive])
        #expect(recorded.recorder("staying")?.calls.map(\.description) == ["didEnterBackground@background"])
    }

    @Test("A discarded unit woken for an event relaunches from its saved state, in the background")
    func aDiscardedUnitWokenForAnEventRelaunchesRestoring() async throws {
        let recorded = RecordedApplication()
        let unit = try recorded.app.makeUnit("u")
        try await unit.advance(to: .suspended)
        _ = unit.release(ReleaseRequest(level: .critical, tier: .suspendedUnits, targetBytes: .max))  // discarded under pressure
        #expect(unit.state == .notRunning)
        let restored = try await recorded.app.deliverBackgroundEvent(to: "u") { unit in
            recorded.recorder("u")?.calls.first?.restoring
        }
        #expect(restored == true)
        #expect(recorded.recorder("u")?.callbacks == [.willFinishLaunching, .didFinishLaunching, .didEnterBackground])
        #expect(recorded.launches("u") == 2)
    }

    @Test("An event that outlives the background time is cancelled, and its task ended")
    func anEventPastTheBackgroundTimeIsCancelled() async throws {
        let recorded = RecordedApplication(configuration: LifeCycleConfiguration(backgroundTaskTime: .milliseconds(50)))
        await #expect(throws: CancellationError.self) {
            try await recorded.app.deliverBackgroundEvent(to: "u") { _ in try await waitForCancellation(within: .seconds(10)) }
        }
        #expect(recorded.app.unit("u")?.backgroundTasks.isEmpty == true)
    }

    // MARK: The memory warning

    /// An application with units in every state.
    static func applicationWithUnitsInEveryState() async throws -> RecordedApplication {
        let recorded = RecordedApplication()
        try await recorded.app.launch()
        try await recorded.app.makeUnit("inactive").advance(to: .inactive)
        try await recorded.app.activateUnit("active")
        try await recorded.app.makeUnit("background").advance(to: .background)
        try await recorded.app.makeUnit("suspended").advance(to: .suspended)
        let discarded = try recorded.app.makeUnit("discarded")
        try await discarded.advance(to: .suspended)
        _ = discarded.release(ReleaseRequest(level: .critical, tier: .suspendedUnits, targetBytes: .max))
        _ = try recorded.app.makeUnit("never-launched")
        return recorded
    }

    @Test(
        "\"When low memory occurs, the system calls applicationDidReceiveMemoryWarning(_:) on the app delegate; the app notifies its view controllers\": the application first, then the running units, then the notification"
    )
    func aMemoryWarningReachesTheApplicationThenTheRunningUnitsThenTheNotification() async throws {
        let recorded = try await Self.applicationWithUnitsInEveryState()
        let app = recorded.app
        let order = Locked<[String]>([])
        recorded.appRecorder.during.withLock { during in
            during = { callback, _ in if callback == .didReceiveMemoryWarning { order.withLock { $0.append("application") } } }
        }
        for unit in app.units {
            recorded.recorder(unit.id)?.during.withLock { during in
                during = { callback, unit in if callback == .didReceiveMemoryWarning { order.withLock { $0.append(unit.id) } } }
            }
        }
        app.addObserver { notification in
            if case .memoryWarning = notification.event { order.withLock { $0.append("notification") } }
        }
        let log = NotificationLog(app)

        await app.didReceiveMemoryWarning(level: .critical)

        let heard = order.withLock { $0 }
        #expect(heard.first == "application")
        #expect(Set(heard.dropFirst().dropLast()) == ["inactive", "active", "background"], "the units that run code, and only they")
        #expect(heard.count == 5)
        #expect(heard.last == "notification")
        #expect(recorded.recorder("suspended")?.callbacks.contains(.didReceiveMemoryWarning) == false, "a suspended unit runs no code")
        #expect(recorded.recorder("discarded")?.callbacks.contains(.didReceiveMemoryWarning) == false)
        #expect(recorded.launches("never-launched") == 0)
        #expect(recorded.recorder("active")?.warningLevels.withLock { $0 } == [.critical], "the level is passed on")
        #expect(
            log.notifications.filter { if case .memoryWarning = $0.event { true } else { false } }
                == [LifeCycleNotification(subject: .application, event: .memoryWarning(level: .critical))])
    }

    @Test("A delegate that holds on to the memory warning is cut off at its deadline and reported; the others are still told")
    func aSlowMemoryWarningHandlerIsCutOff() async throws {
        // A deadline the quick handler meets even with the pool's threads busy with other suites.
        let recorded = RecordedApplication(
            configuration: LifeCycleConfiguration(
                suspensionDelay: .seconds(3_600),
                memoryWarningDeadline: .seconds(1)))
        let log = NotificationLog(recorded.app)
        try await recorded.app.activateUnit("slow")
        try await recorded.app.activateUnit("quick")
        recorded.recorder("slow")?.set(.didReceiveMemoryWarning, .overruns)
        await recorded.app.didReceiveMemoryWarning(level: .warning)  // returns at the deadline, not after the handler's minute
        #expect(log.notifications.contains { $0.subject == .unit("slow") && $0.event == .handler(.didReceiveMemoryWarning, .overran(deadline: .seconds(1))) })
        #expect(recorded.recorder("quick")?.callbacks.last == .didReceiveMemoryWarning)
        #expect(log.notifications.last?.event == .memoryWarning(level: .warning))
    }
}

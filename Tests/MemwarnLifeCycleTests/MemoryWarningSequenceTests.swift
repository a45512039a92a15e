import Foundation
import Memwarn
import MemwarnSystem
import MemwarnTestKit
import Testing

@testable import MemwarnLifeCycle
@testable import MemwarnRelease

/// A memory warning's delegates and the release that follows
/// it, through a real coordinator — the release loop's own calls (`deliverMemoryWarning`, then
/// `release`), on a thread of their own as the release loop makes them.
@Suite struct MemoryWarningSequenceTests {
    /// What happened, in order.
    final class Timeline: Sendable {
        private let events = AsyncCondition<[String]>([])
        func note(_ name: String) { events.withLock { $0.append(name) } }
        var names: [String] { events.withLock { $0 } }
        func index(_ name: String) -> Int? { names.firstIndex(of: name) }
        /// Where `name` is, once it happened (at most `limit` from now: a bound against a hang).
        func index(_ name: String, within limit: Duration) async -> Int? {
            await events.wait(within: limit) { $0.firstIndex(of: name) }
        }
    }

    /// A consumer whose release is noted on the timeline.
    final class NotedConsumer: MemoryConsumer, Sendable {
        let name = "noted"
        let tier = ReleaseTier.caches
        let timeline: Timeline
        init(_ timeline: Timeline) { self.timeline = timeline }
        var footprintBytes: Int { 1 << 20 }
        func release(_ request: ReleaseRequest) -> Int {
            timeline.note("release")
            return 0
        }
    }

    /// The release loop's sequence for one warning: the responders told, then the release — the
    /// application as the coordinator's responder, awaited here to its return. (The coordinator
    /// itself waits at most the budget and as long again: a test of that, on a machine whose
    /// threads the other suites keep busy for seconds, would measure the machine; its own test,
    /// below, uses a responder that returns at once.)
    static func warnAndRelease(_ app: LifeCycleApplication, _ coordinator: ReleaseCoordinator, _ timeline: Timeline) async {
        await app.didReceiveMemoryWarning(level: .warning)
        timeline.note("returned")
        coordinator.release(level: .warning, targetBytes: .max)
    }

    /// An application with one running unit; the timeline notes each delegate's warning, its
    /// overruns (notifications) and the warning's notification.
    /// The budget of these tests: long enough that a busy machine (the other suites run beside
    /// these) schedules every task well within it; the handlers' times are fractions of it.
    static let budget = Duration.seconds(1)

    static func application(_ timeline: Timeline, coordinator: ReleaseCoordinator) async throws -> (RecordedApplication, NotedConsumer) {
        let recorded = RecordedApplication(
            configuration: LifeCycleConfiguration(suspensionDelay: .seconds(3_600), memoryWarningDeadline: budget),
            coordinator: coordinator)
        let consumer = NotedConsumer(timeline)  // held by the caller: a coordinator holds its consumers weakly
        coordinator.register(consumer)
        coordinator.addWarningResponder(recorded.app)
        try await recorded.app.launch()
        try await recorded.app.activateUnit("unit")
        recorded.app.addObserver { notification in
            switch notification.event {
            case .memoryWarning: timeline.note("notification")
            case .handler(.didReceiveMemoryWarning, .overran):
                timeline.note(notification.subject == .application ? "application overran" : "unit overran")
            default: break
            }
        }
        return (recorded, consumer)
    }

    @Test func oneBudgetCoversTheApplicationAndTheUnitsAndTheReleaseComesLast() async throws {
        let timeline = Timeline()
        let coordinator = ReleaseCoordinator(trimsHeap: false)
        let (recorded, consumer) = try await Self.application(timeline, coordinator: coordinator)
        defer { withExtendedLifetime(consumer) {} }
        // Two delegates of 60 ms each do not fit in a budget of 100 ms: here the
        // application's delegate runs until it is cut off (at its half), the unit's until this
        // test lets it end, whatever the cut-off.
        recorded.appRecorder.during.withLock { during in
            during = { callback, _ in
                guard callback == .didReceiveMemoryWarning else { return }
                timeline.note("application told")
                try? await waitForCancellation(within: .seconds(10))
            }
        }
        let unitMayEnd = AsyncCondition<Bool>()
        recorded.recorder("unit")?.during.withLock { during in
            during = { callback, _ in
                guard callback == .didReceiveMemoryWarning else { return }
                timeline.note("unit told")
                await unitMayEnd.wait(within: .seconds(10))  // ignores the cut-off
                timeline.note("unit done")
            }
        }
        await Self.warnAndRelease(recorded.app, coordinator, timeline)
        let names = timeline.names
        let release = try #require(timeline.index("release"), "\(names)")
        #expect(timeline.index("application told").map { $0 < release } == true, "\(names)")
        #expect(timeline.index("unit told").map { $0 < release } == true, "\(names)")
        #expect(timeline.index("notification").map { $0 < release } == true, "the notification before the release: \(names)")
        #expect(
            timeline.index("unit overran").map { $0 < release } == true,
            "the two do not fit in 1 s: the unit still running when the release starts is reported: \(names)")
        // The unit's handler, cut off, ends when let: after the release, which did not wait for it
        // (had it waited, the handler would have ended first, at its 10 s bound).
        unitMayEnd.open()
        let done = try #require(await timeline.index("unit done", within: .seconds(10)), "the cut-off handler never ended: \(timeline.names)")
        #expect(done > release, "the release did not wait for the late unit: \(timeline.names)")
    }

    @Test func anApplicationDelegateThatOverrunsLeavesTheUnitsTimeBeforeTheRelease() async throws {
        let timeline = Timeline()
        let coordinator = ReleaseCoordinator(trimsHeap: false)
        let (recorded, consumer) = try await Self.application(timeline, coordinator: coordinator)
        defer { withExtendedLifetime(consumer) {} }
        recorded.appRecorder.set(.didReceiveMemoryWarning, .overruns)  // a minute, ignoring cancellation
        recorded.recorder("unit")?.during.withLock { during in
            during = { callback, _ in if callback == .didReceiveMemoryWarning { timeline.note("unit told") } }
        }
        await Self.warnAndRelease(recorded.app, coordinator, timeline)
        let names = timeline.names
        let release = try #require(timeline.index("release"), "\(names)")
        #expect(timeline.index("application overran").map { $0 < release } == true, "\(names)")
        #expect(timeline.index("unit told").map { $0 < release } == true, "the unit is told before its caches are released: \(names)")
        #expect(timeline.index("notification").map { $0 < release } == true, "\(names)")
    }

    /// A warning that finds a unit in the middle of a transition (a `didEnterBackground` that
    /// takes its time) is not held by it: the sequence returns within its budget, the unit is
    /// reported as overrun, and its delegate is told once the transition is over — late, never
    /// dropped. The transition waits on a gate this test opens, so nothing here is timed.
    @Test func aWarningBehindATransitionUnderWayReturnsWithinItsBudgetAndTellsTheUnitLater() async throws {
        let recorded = RecordedApplication(
            configuration: LifeCycleConfiguration(
                suspensionDelay: .seconds(3_600),
                memoryWarningDeadline: .milliseconds(100)))
        let log = NotificationLog(recorded.app)
        try await recorded.app.launch()
        let unit = try await recorded.app.activateUnit("saving")
        let gate = AsyncCondition<Bool>()
        let steps = AsyncCondition<[String]>([])
        recorded.recorder("saving")?.during.withLock { during in
            during = { callback, _ in
                switch callback {
                case .didEnterBackground:
                    steps.withLock { $0.append("saving") }
                    await gate.wait(within: .seconds(10))
                    steps.withLock { $0.append("saved") }
                case .didReceiveMemoryWarning:
                    steps.withLock { $0.append("warned") }
                default: break
                }
            }
        }
        recorded.setUnitBehaviour(.didEnterBackground, .completes)
        let moving = Task { try await unit.advance(to: .background) }
        try #require(await steps.wait(within: .seconds(10), until: { $0.contains("saving") }), "the unit began to save")

        await recorded.app.didReceiveMemoryWarning(level: .warning)
        #expect(steps.withLock { $0 } == ["saving"], "the warning returned while the unit was still saving")
        #expect(
            log.notifications.contains {
                $0.subject == .unit("saving") && $0.event == .handler(.didReceiveMemoryWarning, .overran(deadline: .milliseconds(100)))
            })

        gate.open()
        try await moving.value
        await steps.wait(within: .seconds(10), until: { $0.contains("warned") })
        #expect(steps.withLock { $0 } == ["saving", "saved", "warned"], "told after the transition, not dropped")
    }

    /// The coordinator's part in the warning's budget: it starts the release once its responder returned
    /// (not at a fixed time of its own), and a responder that does not return is not waited for
    /// past its deadline and as long again.
    @Test func theCoordinatorReleasesOnceItsResponderReturnedAndNotLaterThanTwiceItsDeadline() async throws {
        final class Responder: MemoryWarningResponder, Sendable {
            let memoryWarningDeadline: Duration
            let timeline: Timeline
            let returns: Bool
            /// Opened at the end of the test's round: one that does not return ends then.
            let ends = AsyncCondition<Bool>()
            init(deadline: Duration, timeline: Timeline, returns: Bool) {
                memoryWarningDeadline = deadline
                self.timeline = timeline
                self.returns = returns
            }
            func didReceiveMemoryWarning(level: MemoryPressureLevel) async {
                timeline.note("responder told")
                if !returns { await ends.wait(within: .seconds(60)) }
                timeline.note("responder returned")
            }
        }
        for returns in [true, false] {
            let timeline = Timeline()
            let coordinator = ReleaseCoordinator(trimsHeap: false)
            let consumer = NotedConsumer(timeline)
            coordinator.register(consumer)
            // A long deadline when it returns (a busy machine schedules it in time), a short one when not.
            let responder = Responder(deadline: returns ? .seconds(30) : .milliseconds(200), timeline: timeline, returns: returns)
            coordinator.addWarningResponder(responder)
            let began = ContinuousClock.now
            let delivery = await withCheckedContinuation { (done: CheckedContinuation<MemoryWarningDelivery, Never>) in
                Thread.detachNewThread {
                    let delivery = coordinator.deliverMemoryWarning(level: .warning)
                    coordinator.release(level: .warning, targetBytes: .max)
                    done.resume(returning: delivery)
                }
            }
            let names = timeline.names
            if returns {
                #expect(delivery.overran == 0 && timeline.index("responder returned").map { $0 < timeline.index("release")! } == true, "\(names)")
            } else {
                #expect(delivery.overran == 1 && timeline.index("responder returned") == nil && timeline.index("release") != nil, "\(names)")
                #expect(ContinuousClock.now - began < .seconds(30), "not waited for past twice its deadline (and a busy machine)")
            }
            responder.ends.open()
            withExtendedLifetime((consumer, responder)) {}
        }
    }

    /// A cut-off callback went on running and overlapped the delegate's next ones (the
    /// next warning, `willResignActive`, `didEnterBackground`). Now the release does not wait for
    /// it, but the delegate's next callback does.
    @Test func aCutOffCallbackDoesNotOverlapTheSameDelegatesNextOnes() async throws {
        let recorded = RecordedApplication(
            configuration: LifeCycleConfiguration(
                suspensionDelay: .seconds(3_600),
                memoryWarningDeadline: .milliseconds(100)))
        let log = NotificationLog(recorded.app)
        try await recorded.app.launch()
        let unit = try await recorded.app.activateUnit("slow")
        // Each callback's beginning and end, in the order they happened.
        let steps = AsyncCondition<[(callback: LifeCycleCallback, begins: Bool)]>([])
        let slowMayEnd = AsyncCondition<Bool>()
        let first = Locked(true)
        recorded.recorder("slow")?.during.withLock { during in
            during = { callback, _ in
                steps.withLock { $0.append((callback, true)) }
                let isFirstWarning =
                    callback == .didReceiveMemoryWarning
                    && first.withLock { isFirst in
                        defer { isFirst = false }
                        return isFirst
                    }
                if isFirstWarning {
                    // Until this test lets it end, ignoring cancellation: cut off at 100 ms.
                    await slowMayEnd.wait(within: .seconds(10))
                }
                steps.withLock { $0.append((callback, false)) }
            }
        }
        await recorded.app.didReceiveMemoryWarning(level: .warning)
        #expect(steps.withLock { !$0.contains { !$0.begins } }, "the warning returned at its budget, its handler still running")
        await recorded.app.didReceiveMemoryWarning(level: .warning)  // the slow one still runs: this one waits, detached
        let moving = Task { try await unit.advance(to: .background) }  // waits for both
        slowMayEnd.open()
        try await moving.value
        // Every callback begun has ended (the slow one included), bounded against a hang.
        await steps.wait(within: .seconds(5), until: { $0.filter(\.begins).count == $0.filter { !$0.begins }.count })
        let seen = steps.withLock { $0 }
        #expect(
            seen.filter(\.begins).map(\.callback) == [.didReceiveMemoryWarning, .didReceiveMemoryWarning, .willResignActive, .didEnterBackground],
            "\(seen.map { "\($0.begins ? "begins" : "ends") \($0.callback)" })")
        for (index, step) in seen.enumerated() {
            #expect(step.begins == index.isMultiple(of: 2), "one callback at a time: \(seen.map { "\($0.begins ? "begins" : "ends") \($0.callback)" })")
        }
        let overruns = log.notifications.filter {
            $0.subject == .unit("slow") && $0.event == .handler(.didReceiveMemoryWarning, .overran(deadline: .milliseconds(100)))
        }
        #expect(overruns.count == 2, "the first cut off, the second delivered after it, past its budget: \(log.notifications)")
    }
}

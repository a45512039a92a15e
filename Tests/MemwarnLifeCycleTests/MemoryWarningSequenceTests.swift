import Foundation
@testable import Memwarn
@testable import MemwarnLifeCycle
import MemwarnSystem
import Testing

/// Issue 28, items 13 and 14, as filed: a memory warning's delegates and the release that follows
/// it, through a real coordinator — the release loop's own calls (`deliverMemoryWarning`, then
/// `release`), on a thread of their own as the release loop makes them.
@Suite struct MemoryWarningSequenceTests {
    /// What happened, in order, and when.
    final class Timeline: Sendable {
        private let events = Locked<[(name: String, at: ContinuousClock.Instant)]>([])
        func note(_ name: String) { events.withLock { $0.append((name, .now)) } }
        var names: [String] { events.withLock { $0.map(\.name) } }
        func index(_ name: String) -> Int? { names.firstIndex(of: name) }
        func time(_ name: String) -> ContinuousClock.Instant? { events.withLock { $0.first { $0.name == name }?.at } }
    }

    /// A consumer whose release is noted on the timeline.
    final class NotedConsumer: MemoryConsumer, @unchecked Sendable {
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

    /// The release loop's sequence for one warning: the responders told, then the release.
    static func warnAndRelease(_ coordinator: ReleaseCoordinator) async {
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            Thread.detachNewThread {
                _ = coordinator.deliverMemoryWarning(level: .warning)
                _ = coordinator.release(level: .warning, targetBytes: .max)
                done.resume()
            }
        }
    }

    /// An application with one running unit; the timeline notes each delegate's warning, its
    /// overruns (notifications) and the warning's notification.
    static func application(_ timeline: Timeline, coordinator: ReleaseCoordinator) async throws -> (RecordedApplication, NotedConsumer) {
        let recorded = RecordedApplication(coordinator: coordinator)
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
        // As filed: the application's delegate 60 ms, the unit's 60 ms, a budget of 100 ms.
        recorded.appRecorder.during.withLock { during in
            during = { callback, _ in
                guard callback == .didReceiveMemoryWarning else { return }
                timeline.note("application told")
                try? await Task.sleep(for: .milliseconds(60))
            }
        }
        recorded.recorder("unit")?.during.withLock { during in
            during = { callback, _ in
                guard callback == .didReceiveMemoryWarning else { return }
                timeline.note("unit told")
                try? await Task.sleep(for: .milliseconds(60))
            }
        }
        await Self.warnAndRelease(coordinator)
        let names = timeline.names
        let release = try #require(timeline.index("release"), "\(names)")
        #expect(timeline.index("application told").map { $0 < release } == true, "\(names)")
        #expect(timeline.index("unit told").map { $0 < release } == true, "\(names)")
        #expect(timeline.index("notification").map { $0 < release } == true, "the notification before the release: \(names)")
        #expect(timeline.index("unit overran").map { $0 < release } == true,
                "60 + 60 ms do not fit in 100: the unit still running when the release starts is reported: \(names)")
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
        await Self.warnAndRelease(coordinator)
        let names = timeline.names
        let release = try #require(timeline.index("release"), "\(names)")
        #expect(timeline.index("application overran").map { $0 < release } == true, "\(names)")
        #expect(timeline.index("unit told").map { $0 < release } == true, "the unit is told before its caches are released: \(names)")
        #expect(timeline.index("notification").map { $0 < release } == true, "\(names)")
    }

    /// Item 14: a cut-off callback went on running and overlapped the delegate's next ones (the
    /// next warning, `willResignActive`, `didEnterBackground`). Now the release does not wait for
    /// it, but the delegate's next callback does.
    @Test func aCutOffCallbackDoesNotOverlapTheSameDelegatesNextOnes() async throws {
        let recorded = RecordedApplication(configuration: LifeCycleConfiguration(suspensionDelay: .seconds(3_600),
                                                                               memoryWarningDeadline: .milliseconds(100)))
        let log = NotificationLog(recorded.app)
        try await recorded.app.launch()
        let unit = try await recorded.app.activateUnit("slow")
        // Each callback's beginning and end, in the order they happened.
        let steps = Locked<[(callback: LifeCycleCallback, begins: Bool)]>([])
        let first = Locked(true)
        recorded.recorder("slow")?.during.withLock { during in
            during = { callback, _ in
                steps.withLock { $0.append((callback, true)) }
                let isFirstWarning = callback == .didReceiveMemoryWarning && first.withLock { isFirst in
                    defer { isFirst = false }
                    return isFirst
                }
                if isFirstWarning {
                    // 300 ms, ignoring cancellation: cut off at 100.
                    await Task.detached { try? await Task.sleep(for: .milliseconds(300)) }.value
                }
                steps.withLock { $0.append((callback, false)) }
            }
        }
        await recorded.app.didReceiveMemoryWarning(level: .warning)
        #expect(steps.withLock { $0.count } == 1, "the warning returned at its budget, with its handler still running")
        await recorded.app.didReceiveMemoryWarning(level: .warning)  // within its budget the slow one is still running
        try await unit.advance(to: .background)
        // Every callback begun has ended (the slow one included), bounded against a hang.
        let deadline = ContinuousClock.now + .seconds(5)
        while steps.withLock({ $0.filter(\.begins).count != $0.filter { !$0.begins }.count }), ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
        }
        let seen = steps.withLock { $0 }
        #expect(seen.filter(\.begins).map(\.callback) == [.didReceiveMemoryWarning, .willResignActive, .didEnterBackground],
                "\(seen.map { "\($0.begins ? "begins" : "ends") \($0.callback)" })")
        for (index, step) in seen.enumerated() {
            #expect(step.begins == index.isMultiple(of: 2), "one callback at a time: \(seen.map { "\($0.begins ? "begins" : "ends") \($0.callback)" })")
        }
        let overruns = log.notifications.filter { $0.subject == .unit("slow") && $0.event == .handler(.didReceiveMemoryWarning, .overran(deadline: .milliseconds(100))) }
        #expect(overruns.count == 2, "the first cut off, the second not started within its budget: \(log.notifications)")
    }
}

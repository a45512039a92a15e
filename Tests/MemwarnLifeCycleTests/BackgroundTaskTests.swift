import Memwarn
import MemwarnSystem
import Testing

@testable import MemwarnLifeCycle

/// `beginBackgroundTask`, `endBackgroundTask` and `backgroundTimeRemaining`, as UIKit documents them.
@Suite("Background tasks")
struct BackgroundTaskTests {
    /// A unit in the background, saved, with a long suspension delay unless told otherwise.
    static func backgroundUnit(_ recorded: RecordedApplication, _ id: String = "u") async throws -> LifeCycleUnit {
        let unit = try await recorded.app.activateUnit(id)
        try await recorded.app.moveUnitToBackground(id)
        return unit
    }

    @Test func aRunningTaskKeepsTheUnitFromBeingSuspendedUntilItEnds() async throws {
        let recorded = RecordedApplication(configuration: LifeCycleConfiguration(suspensionDelay: .milliseconds(10)))
        let log = NotificationLog(recorded.app)
        let unit = try await recorded.app.activateUnit("u")
        let task = unit.beginBackgroundTask(name: "upload")
        #expect(task != .invalid)
        try await recorded.app.moveUnitToBackground("u")
        await #expect(throws: LifeCycleError.backgroundTasksRunning(unit: "u", count: 1)) { try await unit.transition(to: .suspended) }
        #expect(unit.state == .background)
        #expect(unit.endBackgroundTask(task))
        try await log.wait(for: "suspended once the task ended") { $0.isStateChange(of: .unit("u"), to: .suspended) }
        #expect(log.notifications.contains { $0.event == .backgroundTaskBegan(task, name: "upload") })
        #expect(log.notifications.contains { $0.event == .backgroundTaskEnded(task, name: "upload") })
    }

    @Test func atExpiryTheHandlerRunsThenTheTaskIsEndedAndTheUnitSuspends() async throws {
        let recorded = RecordedApplication(
            configuration: LifeCycleConfiguration(
                suspensionDelay: .milliseconds(10),
                backgroundTaskTime: .milliseconds(50)))
        let log = NotificationLog(recorded.app)
        let unit = try await recorded.app.activateUnit("u")
        let expired = Locked<[String]>([])
        let first = unit.beginBackgroundTask(name: "first") { expired.withLock { $0.append("first") } }
        let second = unit.beginBackgroundTask(name: "second") { expired.withLock { $0.append("second") } }
        try await recorded.app.moveUnitToBackground("u")
        // The handlers leave their tasks running: each is ended for them once its handler returned.
        try await log.wait(for: "second ended") { $0.event == .backgroundTaskEnded(second, name: "second") }
        #expect(expired.withLock { $0 } == ["first", "second"], "each handler ran once, before its task was ended")
        let events = log.notifications.map(\.event).filter {
            [
                .backgroundTaskExpired(first, name: "first"), .backgroundTaskEnded(first, name: "first"),
                .backgroundTaskExpired(second, name: "second"), .backgroundTaskEnded(second, name: "second"),
            ].contains($0)
        }
        #expect(
            events == [
                .backgroundTaskExpired(first, name: "first"), .backgroundTaskEnded(first, name: "first"),
                .backgroundTaskExpired(second, name: "second"), .backgroundTaskEnded(second, name: "second"),
            ])
        #expect(unit.backgroundTasks.isEmpty)
        try await log.wait(for: "suspended after expiry") { $0.isStateChange(of: .unit("u"), to: .suspended) }
        #expect(!unit.endBackgroundTask(first), "an expired task was already ended for its owner")
    }

    @Test func nestedTasksEndInAnyOrderAndOnlyTheLastOneFreesTheUnit() async throws {
        let recorded = RecordedApplication()
        let unit = try await Self.backgroundUnit(recorded)
        let outer = unit.beginBackgroundTask(name: "outer")
        let inner = unit.beginBackgroundTask(name: "inner")
        #expect(Set([outer, inner]).count == 2)
        #expect(unit.endBackgroundTask(outer), "the outer task may end first")
        await #expect(throws: LifeCycleError.backgroundTasksRunning(unit: "u", count: 1)) { try await unit.transition(to: .suspended) }
        #expect(unit.endBackgroundTask(inner))
        try await unit.transition(to: .suspended)
        #expect(unit.state == .suspended)
    }

    @Test func oneHundredConcurrentTasksGetDistinctIdentifiersAndAllEnd() async throws {
        let recorded = RecordedApplication()
        let unit = try await Self.backgroundUnit(recorded)
        let identifiers = await withTaskGroup(of: BackgroundTaskIdentifier.self) { group in
            for index in 0..<100 { group.addTask { unit.beginBackgroundTask(name: "task \(index)") } }
            return await group.reduce(into: [BackgroundTaskIdentifier]()) { $0.append($1) }
        }
        #expect(Set(identifiers).count == 100)
        #expect(!identifiers.contains(.invalid))
        #expect(unit.backgroundTasks.count == 100)
        let ended = await withTaskGroup(of: Bool.self) { group in
            for identifier in identifiers { group.addTask { unit.endBackgroundTask(identifier) } }
            return await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        #expect(ended == 100)
        #expect(unit.backgroundTasks.isEmpty)
        try await unit.transition(to: .suspended)
    }

    @Test func endingAnUnknownAnEndedOrTheInvalidTaskIsReportedAsMisuseAndChangesNothing() async throws {
        let recorded = RecordedApplication()
        let log = NotificationLog(recorded.app)
        let unit = try await recorded.app.activateUnit("u")
        let running = unit.beginBackgroundTask(name: "keep")
        let task = unit.beginBackgroundTask(name: "once")
        #expect(unit.endBackgroundTask(task))
        #expect(!unit.endBackgroundTask(task), "ending twice")
        #expect(!unit.endBackgroundTask(BackgroundTaskIdentifier(rawValue: 9_999)), "never begun")
        #expect(!unit.endBackgroundTask(.invalid))
        let misuses = log.notifications.filter { if case .misuse = $0.event { true } else { false } }
        #expect(misuses.count == 3)
        #expect(misuses.first?.description.contains("no such running task") == true)
        #expect(unit.backgroundTasks == [running: "keep"], "the other task still runs")
    }

    @Test func backgroundTimeRemainingIsUnlimitedInTheForegroundCountsDownInTheBackgroundAndIsZeroWhenSuspended() async throws {
        let recorded = RecordedApplication(configuration: LifeCycleConfiguration(suspensionDelay: .seconds(3_600), backgroundTaskTime: .seconds(30)))
        let unit = try await recorded.app.activateUnit("u")
        #expect(unit.backgroundTimeRemaining == nil)
        try await recorded.app.moveUnitToBackground("u")
        let remaining = try #require(unit.backgroundTimeRemaining)
        #expect(remaining > .zero && remaining <= .seconds(30))
        try await unit.transition(to: .suspended)
        #expect(unit.backgroundTimeRemaining == .zero)
    }

    @Test func noTaskBeginsInASuspendedOrNotRunningUnitOrOnceTheBackgroundTimeIsUsedUp() async throws {
        let recorded = RecordedApplication(configuration: LifeCycleConfiguration(suspensionDelay: .seconds(3_600), backgroundTaskTime: .milliseconds(20)))
        let log = NotificationLog(recorded.app)
        let fresh = try recorded.app.makeUnit("fresh")
        #expect(fresh.beginBackgroundTask() == .invalid, "not running")
        let unit = try await recorded.app.activateUnit("u")
        let holder = unit.beginBackgroundTask(name: "holder")  // begun in the foreground: it must expire
        try await recorded.app.moveUnitToBackground("u")
        try await log.wait(for: "the holder expired") { $0.event == .backgroundTaskExpired(holder, name: "holder") }
        #expect(unit.beginBackgroundTask() == .invalid, "the background time is used up")
        try await unit.transition(to: .suspended)
        #expect(unit.beginBackgroundTask() == .invalid, "suspended")
    }
}

import Memwarn
import MemwarnSystem
import Testing

@testable import MemwarnLifeCycle

/// Terminating suspended units, in process: who goes, in which order, what happens to their
/// consumers, and how they come back.
@Suite("Terminate-suspended")
struct TerminateSuspendedTests {
    /// A unit delegate holding a cache of `bytes` and a list of writes it saves in
    /// `didEnterBackground` to a shared "disk", and loads when relaunched.
    final class Session: LifeCycleDelegate {
        typealias Subject = LifeCycleUnit
        let cache: DiscardableCache<Int, [UInt8]>
        let writes = Locked<[Int]>([])
        let disk: Locked<[String: [Int]]>
        let restored = Locked(false)

        init(bytes: Int, coordinator: ReleaseCoordinator, disk: Locked<[String: [Int]]>) {
            self.disk = disk
            cache = DiscardableCache(coordinator: coordinator)
            for key in 0..<(bytes / 1_024) { cache.setObject([UInt8](repeating: 1, count: 1_024), forKey: key, cost: 1_024) }
        }

        func willFinishLaunching(_ unit: LifeCycleUnit, restoring: Bool) async throws {
            cache.name = "\(unit.id) cache"
            unit.adopt(cache)
            if restoring {
                let saved = disk.withLock { $0[unit.id] } ?? []
                writes.withLock { $0 = saved }
                restored.withLock { $0 = true }
            }
        }

        func didEnterBackground(_ unit: LifeCycleUnit) async throws {
            let current = writes.withLock { $0 }
            disk.withLock { $0[unit.id] = current }
        }
    }

    final class Fixture: Sendable {
        let coordinator = ReleaseCoordinator(trimsHeap: false)
        let disk = Locked<[String: [Int]]>([:])
        let sizes: [String: Int]
        let sessions = Locked<[String: [WeakSession]]>([:])
        let app: LifeCycleApplication

        struct WeakSession: Sendable { weak var session: Session? }

        init(sizes: [String: Int]) {
            self.sizes = sizes
            let coordinator = self.coordinator
            let disk = self.disk
            let sessions = self.sessions
            app = LifeCycleApplication(configuration: LifeCycleConfiguration(suspensionDelay: .seconds(3_600)), coordinator: coordinator) { unit in
                let session = Session(bytes: sizes[unit.id] ?? 0, coordinator: coordinator, disk: disk)
                sessions.withLock { $0[unit.id, default: []].append(WeakSession(session: session)) }
                return session
            }
        }

        func session(_ id: String) throws -> Session {
            try #require(app.unit(id)?.delegate as? Session)
        }

        /// Activates every unit, writes `writes` to each, then suspends those named.
        func start(suspending: [String], writes: Int = 10) async throws {
            for id in sizes.keys.sorted() {
                try await app.activateUnit(id)
                try session(id).writes.withLock { $0 = Array(0..<writes) }
            }
            for id in suspending { try await app.makeUnit(id).advance(to: .suspended) }
        }
    }

    static let kibibyte = 1_024

    @Test func suspendedUnitsGoLargestFirstActiveOnesNeverAndItStopsAtTheTarget() async throws {
        let fixture = Fixture(sizes: [
            "big": 600 * Self.kibibyte, "mid": 300 * Self.kibibyte, "small": 100 * Self.kibibyte,
            "busy": 900 * Self.kibibyte,
        ])
        try await fixture.start(suspending: ["small", "big", "mid"])
        let log = NotificationLog(fixture.app)
        let report = fixture.app.terminateSuspendedUnits(targetBytes: 700 * Self.kibibyte)
        #expect(report.entries.map(\.consumer) == ["unit big", "unit mid"])
        #expect(report.entries.map(\.tier) == [.suspendedUnits, .suspendedUnits])
        #expect(report.entries.map(\.bytesFreed) == [600 * Self.kibibyte, 300 * Self.kibibyte])
        #expect(fixture.app.unit("big")?.state == .notRunning)
        #expect(fixture.app.unit("mid")?.state == .notRunning)
        #expect(fixture.app.unit("small")?.state == .suspended, "the target was met before it")
        #expect(fixture.app.unit("busy")?.state == .active, "an active unit is never terminated")
        #expect(Set(fixture.app.discardedUnits) == ["big", "mid"])
        #expect(log.notifications.contains { $0.subject == .unit("big") && $0.event == .discarded(freedBytes: 600 * Self.kibibyte) })
        #expect(!log.notifications.contains { $0.event == .callback(.willTerminate) }, "a suspended unit is not told")
    }

    @Test func aSuspendedUnitsConsumersLeaveTheTiersAndATerminatedUnitsAreReleasedUnregisteredAndDropped() async throws {
        let fixture = Fixture(sizes: ["a": 200 * Self.kibibyte, "b": 100 * Self.kibibyte])
        try await fixture.start(suspending: ["a"])
        let names = { Set(fixture.coordinator.consumers.map(\.name)) }
        #expect(names() == ["unit a", "b cache"], "suspended: the unit stands in tier 5, its cache in no tier")
        let cache = try fixture.session("a").cache
        let warning = fixture.coordinator.release(level: .warning, targetBytes: .max)
        #expect(cache.totalCost == 200 * Self.kibibyte, "a warning does not touch a suspended unit's cache")
        #expect(warning.entries.map(\.consumer) == ["b cache"])

        fixture.app.terminateSuspendedUnits()
        #expect(cache.count == 0, "released")
        #expect(names() == ["b cache"], "unregistered")
        #expect(fixture.app.unit("a")?.delegate == nil)
        #expect(fixture.sessions.withLock { $0["a"]?.first?.session } == nil, "the delegate was dropped and freed")
    }

    @Test func criticalPressureThroughTheCoordinatorTerminatesSuspendedUnitsOnlyAfterTheOtherTiers() async throws {
        let fixture = Fixture(sizes: ["parked": 300 * Self.kibibyte, "working": 300 * Self.kibibyte])
        try await fixture.start(suspending: ["parked"])
        let report = fixture.coordinator.release(level: .critical, targetBytes: 400 * Self.kibibyte)
        #expect(report.entries.map(\.consumer) == ["working cache", "unit parked"])
        #expect(report.entries.map(\.tier) == [.caches, .suspendedUnits])
        let warning = fixture.coordinator.release(level: .warning, targetBytes: .max)
        #expect(!warning.entries.contains { $0.tier == .suspendedUnits }, "a warning never terminates")
    }

    @Test func askingForATerminatedUnitRelaunchesItFromItsSavedStateWithNothingLost() async throws {
        let fixture = Fixture(sizes: ["alice": 100 * Self.kibibyte])
        try await fixture.start(suspending: [], writes: 0)
        let first = try fixture.session("alice")
        first.writes.withLock { $0 = Array(0..<42) }
        try await fixture.app.makeUnit("alice").advance(to: .suspended)
        fixture.app.terminateSuspendedUnits()
        #expect(fixture.app.unit("alice")?.state == .notRunning)

        let unit = try await fixture.app.activateUnit("alice")
        #expect(unit.state == .active)
        #expect(unit.launchCount == 2)
        #expect(unit.discardCount == 1)
        let relaunched = try fixture.session("alice")
        #expect(relaunched !== first)
        #expect(relaunched.restored.withLock { $0 })
        #expect(relaunched.writes.withLock { $0 } == Array(0..<42), "lost writes: 0")
        #expect(fixture.app.discardedUnits.isEmpty)
        #expect(Set(fixture.coordinator.consumers.map(\.name)) == ["alice cache"], "the new cache is in its tier again")
    }

    @Test func aUnitBeingResumedIsNotTerminated() async throws {
        let fixture = Fixture(sizes: ["u": 100 * Self.kibibyte])
        try await fixture.start(suspending: ["u"])
        try await fixture.app.makeUnit("u").transition(to: .background)
        #expect(fixture.app.terminateSuspendedUnits().entries.isEmpty, "it left tier 5 when it resumed")
        #expect(fixture.app.unit("u")?.state == .background)
    }

    @Test func resumingAndTerminatingAtOnceLeaveTheUnitInOneConsistentState() async throws {
        for round in 0..<50 {
            let fixture = Fixture(sizes: ["u": 64 * Self.kibibyte])
            try await fixture.start(suspending: ["u"], writes: round)
            async let resumed = fixture.app.activateUnit("u")
            let report = fixture.app.terminateSuspendedUnits()
            _ = try await resumed
            let unit = try #require(fixture.app.unit("u"))
            #expect(unit.state == .active, "asked for, it is active either way")
            #expect(unit.launchCount == 1 + report.entries.filter { $0.bytesFreed > 0 }.count)
            #expect(try fixture.session("u").writes.withLock { $0 } == Array(0..<round), "nothing lost in round \(round)")
        }
    }
}

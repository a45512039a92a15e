import Hummingbird
import Memwarn
import MemwarnLifeCycle
import ServiceLifecycle
import Synchronization

/// A user's session: a MemwarnLifeCycle unit's delegate (one is made at each launch).
///
/// It keeps the reports the user viewed and a rendered dashboard (in a `DiscardableCache` the
/// unit adopts: released at a warning while the session runs; while it is suspended it is part
/// of the unit, which memwarn terminates at `critical`, largest first). It saves its history when
/// it goes to the background and loads it again when relaunched after such a termination.
final class Session: LifeCycleDelegate {
    private let id: String
    private let store: SessionStore
    private let bytesPerDashboard: Int
    private let dashboards = DiscardableCache<Int, ByteBuffer>()
    private let history = Mutex<[Int]>([])

    init(id: String, store: SessionStore, bytesPerDashboard: Int) {
        self.id = id
        self.store = store
        self.bytesPerDashboard = bytesPerDashboard
        dashboards.name = "dashboard"
        dashboards.countLimit = 1  // only the latest render
    }

    func willFinishLaunching(_ unit: LifeCycleUnit, restoring: Bool) async throws {
        unit.adopt(dashboards)
        if restoring { history.withLock { $0 = store.load(id) } }  // terminated while suspended
    }

    func didEnterBackground(_ unit: LifeCycleUnit) async throws {
        store.save(id, history: history.withLock { $0 })
    }

    func viewed(report: Int) {
        history.withLock { history in
            history.append(report)
            if history.count > 32 { history.removeFirst(history.count - 32) }
        }
    }

    /// The dashboard: the user's recent reports, rendered once per change of the history.
    func dashboard() -> ByteBuffer {
        let recent = history.withLock { $0 }
        var key = Hasher()
        key.combine(recent)
        let version = key.finalize()
        if let page = dashboards.object(forKey: version) { return page }
        var page = renderReport(version, bytes: bytesPerDashboard)
        page.writeString("<p>\(id) viewed: \(recent.map(String.init).joined(separator: ", "))</p>\n")
        dashboards.setObject(page, forKey: version, cost: page.capacity)
        return page
    }
}

/// Where sessions save their state: stands in for the database a real service would use.
final class SessionStore: Sendable {
    private let saved = Mutex<[String: [Int]]>([:])

    func save(_ id: String, history: [Int]) { saved.withLock { $0[id] = history } }
    func load(_ id: String) -> [Int] { saved.withLock { $0[id] ?? [] } }
}

extension LifeCycleApplication {
    /// The user's session, active: launched, resumed or relaunched as needed.
    func session(_ user: String) async throws -> Session {
        let unit = try await activateUnit(user)
        guard let session = unit.delegate as? Session else { throw HTTPError(.serviceUnavailable) }
        return session
    }
}

/// Moves sessions that saw no request for `idleAfter` to the background (they save there, and
/// memwarn suspends them once idle).
final class SessionSweeper: Service {
    private let sessions: LifeCycleApplication
    private let idleAfter: Duration
    private let lastSeen = Mutex<[String: ContinuousClock.Instant]>([:])

    init(sessions: LifeCycleApplication, idleAfter: Duration) {
        self.sessions = sessions
        self.idleAfter = idleAfter
    }

    /// A request for the user's session has just been served.
    func touch(_ user: String) { lastSeen.withLock { $0[user] = .now } }

    func run() async throws {
        try? await cancelWhenGracefulShutdown { [self] in
            while true {
                try await Task.sleep(for: .milliseconds(500))
                let now = ContinuousClock.now
                let idle = lastSeen.withLock { seen in
                    let idle = seen.filter { now - $0.value >= idleAfter }.map(\.key)
                    for user in idle { seen[user] = nil }
                    return idle
                }
                for user in idle { _ = try? await sessions.moveUnitToBackground(user) }
            }
        }
    }
}

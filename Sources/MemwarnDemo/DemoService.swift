import Foundation
import Logging
import Memwarn
import MemwarnLifeCycle
import MemwarnMonitor
import MemwarnSystem

/// The demo's load: every 20 ms it renders a 256 KiB result into a cache that never evicts on
/// its own, reads an older one, and writes a note to each active session; every 0.5 s a new
/// user arrives; a session stays active 2 s, then goes to the background (saving its notes)
/// and is suspended; every 1.5 s an earlier user comes back. Media are decoded from files it
/// generated, and connections come from a pool. Its working set grows about 25 MiB/s: past any
/// limit, unless memwarn gives memory back.
final class DemoService {
    static let tick = Duration.milliseconds(20)
    static let renderBytes = 256 << 10

    let options: DemoOptions
    /// The directory of the demo's files: private to this user (see ``DemoOptions/dataDirectory``).
    let dataDirectory: String
    let log = EventLog()
    let logger: Logger
    let app: LifeCycleApplication
    let renders = DiscardableCache<Int, [UInt8]>()
    let media = MediaStore(name: "posters")
    let connections: ResourcePool<FileHandle>
    /// Notes acknowledged to each user: what the clients were told was stored.
    var acknowledged: [String: Int] = [:]
    var active: [String: Int] = [:]  // user → the tick at which it goes to the background
    var users: [String] = []
    var generator = SystemRandomNumberGenerator()
    var cacheHits = 0, cacheMisses = 0, mediaReads = 0, mismatches = 0
    /// New users refused while memory was exhausted.
    var turnedAway = 0
    /// The monitor, when memwarn is enabled.
    var monitor: PressureMonitor?

    init(options: DemoOptions) throws {
        self.options = options
        var logger = Logger(label: "memwarn-demo")
        logger.logLevel = .error
        self.logger = logger
        let directory: String
        if let given = options.dataDirectory {
            try PrivateDirectory.prepare(given, purpose: "the data directory")
            directory = given
        } else {
            directory = try PrivateDirectory.makeTemporary(prefix: "memwarn-demo")
        }
        dataDirectory = directory
        try FileManager.default.createDirectory(atPath: directory + "/sessions", withIntermediateDirectories: true)
        app = LifeCycleApplication(configuration: LifeCycleConfiguration(suspensionDelay: .milliseconds(200)), logger: logger) { unit in
            UserSession(id: unit.id, directory: directory + "/sessions")
        }
        renders.name = "renders"
        if let budget = options.cacheBudgetBytes { renders.totalCostLimit = budget }
        let dataFile = directory + "/connection.dat"
        guard FileManager.default.createFile(atPath: dataFile, contents: Data(repeating: 7, count: 4_096)) else {
            throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: dataFile])
        }
        connections = ResourcePool(
            name: "connections", bytesPerHandle: 1 << 20, maximumCount: 4,
            open: {
                guard let handle = FileHandle(forReadingAtPath: dataFile) else { throw CocoaError(.fileReadNoSuchFile) }
                return handle
            },
            close: { try $0.close() })
        try generateMedia(in: directory + "/media")
    }

    /// Six 1024×1024 posters (4 MiB each decoded), written as PPM files and decoded.
    private func generateMedia(in directory: String) throws {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        for index in 0..<6 {
            let path = "\(directory)/poster-\(index).ppm"
            try PortablePixmap.write(width: 1_024, height: 1_024, pixel: { x, y in (UInt8(x & 255), UInt8(y & 255), UInt8(index * 40)) }, to: path)
            _ = try media.add("poster-\(index)", path: path)
        }
    }

    func run() async throws {
        if options.memwarnEnabled { try startMemwarn() }
        log.emit("start", ["memwarn": options.memwarnEnabled, "pid": Int(getpid())])
        try await app.launch()
        let end = ContinuousClock.now + options.duration
        var tick = 0
        while ContinuousClock.now < end {
            try await step(tick)
            tick += 1
            try await Task.sleep(for: Self.tick)
        }
        try await finish()
    }

    private func startMemwarn() throws {
        // The default policy (and MEMWARN_* overrides, as for any service): nothing tuned here.
        let policy = try PressurePolicy.load(environment: ProcessInfo.processInfo.environment)
        let monitor = PressureMonitor(configuration: MonitorConfiguration(policy: policy), logger: logger)
        self.monitor = monitor
        // `memwarn trigger` may ask the demo to release (MEMWARN_CONTROL=off withholds it).
        let control = ControlService(monitor: monitor, coordinator: app.coordinator, logger: logger)
        // The application attached: warnings reach the sessions' delegates, then the shared
        // coordinator (the application's) releases.
        app.attach(to: monitor)
        let coordinator = app.coordinator
        coordinator.addReportObserver { [log] report in
            var tiers: [String: Int] = [:]
            for entry in report.entries where entry.bytesFreed > 0 { tiers[entry.tier.name, default: 0] += entry.bytesFreed }
            log.emit("release", ["level": report.level.rawValue, "target": report.targetBytes, "freed": report.freedBytes, "tiers": tiers])
        }
        monitor.addObserver { [log] event in
            log.emit("level", ["level": event.level.rawValue, "usage": Int(event.snapshot.usageBytes), "source": event.source.name])
        }
        monitor.addExhaustionObserver { [log] change in
            log.emit(
                change.isExhausted ? "exhausted" : "recovered",
                [
                    "floor": Int(change.floorBytes), "usage": Int(change.usageBytes), "capacity": Int(change.capacityBytes ?? 0),
                    "growth": Int(change.growthBytesPerSecond),
                ])
        }
        app.addObserver { [log] notification in
            if case .unit(let id) = notification.subject, case .discarded(let freed) = notification.event {
                log.emit("terminated", ["unit": id, "freed": freed])
            }
        }
        Task { [logger] in
            do { try await monitor.run() } catch { logger.error("the monitor stopped", metadata: ["error": "\(error)"]) }
        }
        Task { await control.run() }
    }

    private func step(_ tick: Int) async throws {
        renders.setObject([UInt8](repeating: UInt8(truncatingIfNeeded: tick), count: Self.renderBytes), forKey: tick, cost: Self.renderBytes)
        if renders.object(forKey: Int.random(in: 0...tick, using: &generator)) != nil { cacheHits += 1 } else { cacheMisses += 1 }
        if tick % 5 == 0 { try readPoster(tick) }
        if tick % 10 == 0 { try await connections.withResource { handle in _ = try handle.offset() } }
        if tick % 25 == 0 {
            // Load shedding: while memwarn says memory is exhausted, new users are turned away
            // (a web service would answer 503 with Retry-After) instead of growing into the
            // OOM killer. Users already signed in keep being served.
            if monitor?.isMemoryExhausted == true {
                turnedAway += 1
                log.emit("turned-away", ["user": "user-\(users.count + turnedAway)"])
            } else {
                try await arrive("user-\(users.count)", tick: tick)
            }
        }
        if tick % 75 == 40, let returning = users.filter({ active[$0] == nil }).randomElement(using: &generator) {
            try await arrive(returning, tick: tick)
        }
        for user in active.keys.sorted() { acknowledged[user] = try session(user).write("\(user) note \(acknowledged[user] ?? 0)") }
        for (user, leaves) in active where leaves <= tick {
            active[user] = nil
            try await app.moveUnitToBackground(user)
        }
        if tick % 50 == 0 {
            log.emit(
                "progress",
                [
                    "users": users.count, "active": active.count, "writes": acknowledged.values.reduce(0, +),
                    "suspended": app.units.filter { $0.state == .suspended }.count,
                ])
        }
    }

    private func readPoster(_ tick: Int) throws {
        guard let poster = media["poster-\(tick / 5 % 6)"] else { return }
        _ = try poster.withPixels { rgba, _, _ in rgba[0] }  // decodes again if memwarn dropped it
        mediaReads += 1
    }

    /// A user arrives (new) or comes back (resumed, or relaunched from its notes): checks the
    /// notes against what was acknowledged, then keeps the session active for a while.
    private func arrive(_ user: String, tick: Int) async throws {
        let isNew = !users.contains(user)
        if isNew { users.append(user) }
        try await app.activateUnit(user)
        if !isNew { mismatches += lost(user) }
        active[user] = tick + (isNew ? 100 : 50)
    }

    private func session(_ user: String) throws -> UserSession {
        guard let session = app.unit(user)?.delegate as? UserSession else { throw CocoaError(.featureUnsupported) }
        return session
    }

    /// Notes acknowledged to `user` but missing from its session (or out of order).
    private func lost(_ user: String) -> Int {
        let expected = acknowledged[user] ?? 0
        guard let notes = try? session(user).allNotes else { return expected }
        let intact = notes.enumerated().prefix { $0.element == "\(user) note \($0.offset)" }.count
        return max(0, expected - intact)
    }

    /// Asks every user's session back, counts what it still holds, and signs the user out
    /// (`willTerminate` saves; the session's memory goes), so the check itself stays small.
    private func finish() async throws {
        var verified = 0
        var lostWrites = mismatches
        for user in users {
            let unit = try await app.activateUnit(user)
            let missing = lost(user)
            lostWrites += missing
            verified += (acknowledged[user] ?? 0) - missing
            try await unit.advance(to: .notRunning)
        }
        let units = app.units
        log.emit(
            "summary",
            [
                "memwarn": options.memwarnEnabled, "users": users.count, "writesAcknowledged": acknowledged.values.reduce(0, +),
                "writesVerified": verified, "lostWrites": lostWrites, "relaunched": units.filter { $0.discardCount > 0 }.count,
                "terminated": units.reduce(0) { $0 + $1.discardCount }, "cacheHits": cacheHits, "cacheMisses": cacheMisses,
                "mediaReads": mediaReads, "posterDecodes": media.keys.compactMap { media[$0]?.decodeCount }.reduce(0, +),
                "turnedAway": turnedAway, "forecastWarnings": monitor?.forecastTally.raised ?? 0,
                "falseForecasts": monitor?.forecastTally.falseAlarms ?? 0,
            ])
        await app.terminate()
        try? FileManager.default.removeItem(atPath: dataDirectory)
    }
}

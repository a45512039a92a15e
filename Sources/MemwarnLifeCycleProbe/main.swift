// memwarn-lifecycle-probe: a child process whose client sessions are memwarn units, so tests can
// suspend some, drive the process's real cgroup to critical, and see which sessions memwarn
// terminates and whether any acknowledged write is lost. Commands on stdin, one JSON line per
// reply on stdout:
//
//   unit <id> <MiB> [overrun] [scratch=<MiB>]
//                               activate a session holding <MiB> of working set (overrun: its
//                               willTerminate ignores cancellation for a minute; scratch: it
//                               also holds <MiB> it lets go of on a memory warning, and then
//                               prints {"dropped": bytes, "unit": id, "level": level})
//   cache <MiB>                 add <MiB> to a cache of the process's (1 MiB entries, the
//                               caches tier); reply {"cache": its footprint}
//   write <id> <n>              acknowledge n more writes; reply {"acknowledged": total}
//   suspend <id>                move it to the background and wait until it is suspended
//   activate <id>               ask for it again; reply: launches, restored writes, lost writes
//   watch [coordinator]         a PressureMonitor on this process's cgroup, the application
//                               attached (warnings reach the sessions, then the coordinator
//                               releases), or with "coordinator" only the coordinator; every
//                               release prints its report; reply {"watching": level,
//                               "socket": the control endpoint's socket}
//   ballast <bytes>             hold memory no consumer can release
//   status                      every unit's state and footprint: {"<id>": "<state> <bytes>"}
//   serve                       run the LifeCycleApplication in a ServiceGroup (SIGTERM/SIGINT shut it
//                               down); print each callback; exit 0 after a clean shutdown
//   exit
//
// Options: --suspension-delay-ms N, --termination-deadline-ms N
import Foundation
import Logging
import Memwarn
import MemwarnLifeCycle
import MemwarnSystem
import ServiceLifecycle

let output = FileHandle.standardOutput
let outputLock = Locked(())

func reply(_ object: some Encodable) {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys]
    let data = (try? encoder.encode(object)) ?? Data("{\"error\":\"encoding failed\"}".utf8)
    outputLock.withLock { _ in output.write(data + Data("\n".utf8)) }
}

func option(_ name: String, default value: Int) -> Int {
    guard let index = CommandLine.arguments.firstIndex(of: name), index + 1 < CommandLine.arguments.count,
        let number = Int(CommandLine.arguments[index + 1])
    else { return value }
    return number
}

struct SessionPlan: Sendable {
    var workingSetBytes: Int
    var scratchBytes: Int
    var overrunsTermination: Bool

    /// From `unit <id> <MiB> [overrun] [scratch=<MiB>]`'s words after the id.
    init(_ words: ArraySlice<String>) throws {
        guard let mebibytes = words.first.flatMap({ Int($0) }) else { throw ProbeFailure(error: "usage: unit <id> <MiB> [overrun] [scratch=<MiB>]") }
        workingSetBytes = mebibytes << 20
        overrunsTermination = false
        scratchBytes = 0
        for word in words.dropFirst() {
            if word == "overrun" {
                overrunsTermination = true
            } else if word.hasPrefix("scratch="), let scratch = Int(word.dropFirst("scratch=".count)) {
                scratchBytes = scratch << 20
            } else {
                throw ProbeFailure(error: "unknown unit option \"\(word)\" (expected overrun or scratch=<MiB>)")
            }
        }
    }
}

let directory = try PrivateDirectory.makeTemporary(prefix: "memwarn-lifecycle-probe")  // fresh, 0700
let plans = Locked<[String: SessionPlan]>([:])
let sessions = Locked<[String: SessionDelegate]>([:])
/// What each session acknowledged, kept outside the session: what a client was told.
let acknowledged = Locked<[String: Int]>([:])
let logger: Logger = {
    var logger = Logger(label: "memwarn-lifecycle-probe")
    logger.logLevel = .critical
    return logger
}()

let configuration = LifeCycleConfiguration(
    terminationDeadline: .milliseconds(option("--termination-deadline-ms", default: 5_000)),
    suspensionDelay: .milliseconds(option("--suspension-delay-ms", default: 50)))
let app = LifeCycleApplication(configuration: configuration, logger: logger) { unit in
    guard let plan = plans.withLock({ $0[unit.id] }) else { throw ProbeFailure(error: "no plan for \(unit.id)") }
    let session = SessionDelegate(
        id: unit.id, workingSetBytes: plan.workingSetBytes, scratchBytes: plan.scratchBytes,
        directory: directory, overrunsTermination: plan.overrunsTermination)
    sessions.withLock { $0[unit.id] = session }
    return session
}
var monitor: PressureMonitor?
var ballast: [[UInt8]] = []
let cache = DiscardableCache<Int, [UInt8]>()
var cacheEntries = 0

func session(_ id: String) throws -> SessionDelegate {
    guard let session = sessions.withLock({ $0[id] }) else { throw ProbeFailure(error: "no session \(id)") }
    return session
}

func waitUntil(_ id: String, is target: LifeCycleState, after action: () async throws -> Void) async throws {
    let notifications = app.notifications()
    try await action()
    guard app.unit(id)?.state != target else { return }
    for await notification in notifications {
        if notification.subject == .unit(id), case .stateChanged(_, let to) = notification.event, to == target { return }
    }
}

@MainActor func startWatching(applicationAttached: Bool) async throws {
    let running = PressureMonitor(configuration: MonitorConfiguration(environment: [:]), logger: logger)
    let control = ControlService(monitor: running, environment: [:], logger: logger)
    ReleaseCoordinator.shared.addReportObserver { report in reply(report) }
    if applicationAttached { app.attach(to: running) } else { ReleaseCoordinator.shared.attach(to: running) }
    monitor = running
    var events = running.events().makeAsyncIterator()
    Task { try await running.run() }
    Task { await control.run() }
    guard let first = await events.next() else { throw ProbeFailure(error: "the monitor ended at once") }
    reply(["watching": first.level.rawValue, "socket": await control.started() ?? ""])
}

func serve() async throws {
    app.addObserver { notification in
        switch notification.event {
        case .callback(let callback): reply(["callback": callback.rawValue, "subject": notification.subject.description])
        case .handler(let callback, let outcome):
            reply(["handler": callback.rawValue, "subject": notification.subject.description, "outcome": outcome.description])
        default: break
        }
    }
    let launched = app.notifications()
    let group = ServiceGroup(configuration: .init(services: [.init(service: app)], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
    Task {
        do {
            try await group.run()
            let states = Dictionary(uniqueKeysWithValues: app.units.map { ($0.id, $0.state.rawValue) })
            reply(["exited": "clean", "application": app.state.rawValue, "units": states.description])
            try? FileManager.default.removeItem(atPath: directory)
            exit(0)
        } catch {
            reply(ProbeFailure(error: "the service group failed: \(error)"))
            exit(1)
        }
    }
    // The group traps its signals before it starts services: once the application is active,
    // SIGTERM goes to the group.
    for await notification in launched where notification.subject == .application {
        if case .stateChanged(_, .active) = notification.event { break }
    }
    reply(["serving": true])
}

while let line = readLine() {
    let words = line.split(separator: " ").map(String.init)
    do {
        switch (words.first, words.count) {
        case ("unit", 3...5):
            let plan = try SessionPlan(words[2...])
            plans.withLock { $0[words[1]] = plan }
            let unit = try await app.activateUnit(words[1])
            reply(["unit": unit.id, "state": unit.state.rawValue, "footprint": "\(unit.footprintBytes)"])
        case ("write", 3):
            guard let count = Int(words[2]) else { throw ProbeFailure(error: "usage: write <id> <n>") }
            let total = try session(words[1]).write(count)
            acknowledged.withLock { $0[words[1]] = total }
            reply(["acknowledged": total])
        case ("suspend", 2):
            try await waitUntil(words[1], is: .suspended) { _ = try await app.moveUnitToBackground(words[1]) }
            reply(["unit": words[1], "state": app.unit(words[1])?.state.rawValue ?? "unknown"])
        case ("activate", 2):
            let unit = try await app.activateUnit(words[1])
            let current = try session(words[1])
            let promised = acknowledged.withLock { $0[words[1]] ?? 0 }
            reply([
                "unit": unit.id, "state": unit.state.rawValue, "launches": "\(unit.launchCount)",
                "restored": current.restored.map(String.init) ?? "none", "present": "\(current.writeCount)",
                "intact": "\(current.writesAreIntact)", "lost": "\(max(0, promised - current.writeCount))",
            ])
        case ("watch", 1): try await startWatching(applicationAttached: true)
        case ("watch", 2) where words[1] == "coordinator": try await startWatching(applicationAttached: false)
        case ("cache", 2):
            guard let mebibytes = Int(words[1]) else { throw ProbeFailure(error: "usage: cache <MiB>") }
            for key in cacheEntries..<(cacheEntries + mebibytes) { cache.setObject([UInt8](repeating: 1, count: 1 << 20), forKey: key, cost: 1 << 20) }
            cacheEntries += mebibytes
            reply(["cache": cache.footprintBytes])
        case ("ballast", 2):
            guard let bytes = Int(words[1]) else { throw ProbeFailure(error: "usage: ballast <bytes>") }
            ballast.append([UInt8](repeating: 1, count: bytes))
            reply(["ballast": ballast.reduce(0) { $0 + $1.count }])
        case ("status", 1):
            reply(Dictionary(uniqueKeysWithValues: app.units.map { ($0.id, "\($0.state.rawValue) \($0.footprintBytes)") }))
        case ("serve", 1): try await serve()
        case ("exit", 1):
            try? FileManager.default.removeItem(atPath: directory)
            exit(0)
        default: throw ProbeFailure(error: "unknown command \"\(line)\"")
        }
    } catch {
        reply(ProbeFailure(error: "\(error)"))
    }
}
// stdin closed: keep serving if asked to (the test signals us), else leave.
if app.state == .notRunning {
    try? FileManager.default.removeItem(atPath: directory)
    exit(0)
}
while true { try await Task.sleep(for: .seconds(3600)) }

// memwarn-release-probe: a child process that holds memory the way a service would — three
// caches (the largest of PurgeableData, the others of [UInt8]), a media store and a handle pool
// of clearly different sizes — so tests can release it
// inside a real cgroup and compare the report with the kernel's usage. Commands on stdin, one
// JSON line per reply on stdout:
//
//   load                        fill the stores; reply {"footprints": {name: bytes}}
//   release <level> <bytes>     ReleaseCoordinator.shared.release; reply: the report
//   watch                       start a PressureMonitor on this process's cgroup with the
//                               coordinator attached; reply {"watching": level, "sources": […],
//                               "pid": pid, "socket": its control socket or null};
//                               each automatic release prints its report
//   ballast <bytes>             hold that much memory no consumer can release
//   exit
import Foundation
import Logging
import Memwarn
import MemwarnMonitor
import MemwarnSystem

let megabyte = 1 << 20
let output = FileHandle.standardOutput

func reply(_ object: some Encodable) {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys]
    let data = (try? encoder.encode(object)) ?? Data("{\"error\":\"encoding failed\"}".utf8)
    output.write(data + Data("\n".utf8))
}

struct Failure: Encodable { var error: String }

/// A connection stand-in: a descriptor plus the buffers a client library would keep.
final class Connection {
    private var file: FileDescriptor?
    let buffer: [UInt8]
    init() throws {
        do {
            file = try FileDescriptor.open("/dev/null", O_RDWR)
        } catch {
            throw Failure(error: "\(error)")
        }
        buffer = [UInt8](repeating: 7, count: 2 * megabyte)
    }

    func close() throws {
        guard let file = file.take() else { return }
        do {
            try file.close()
        } catch {
            throw Failure(error: "\(error)")
        }
    }
}
extension Failure: Error {}

func fill<Value>(_ cache: DiscardableCache<Int, Value>, bytes: Int, entry: Int, make: (_ key: Int, _ count: Int) -> Value) {
    for key in 0..<(bytes / entry) {
        cache.setObject(make(key, entry), forKey: key, cost: entry)
    }
}

/// Idle purgeable data: its bytes live in memwarn's purgeable arena, not on malloc's heap.
func purgeable(key: Int, count: Int) -> PurgeableData {
    let data = PurgeableData(repeating: UInt8(truncatingIfNeeded: key), count: count)
    data.endContentAccess()
    return data
}

var caches: [AnyObject] = []
var media: MediaStore?
var pool: ResourcePool<Connection>?
var monitor: PressureMonitor?
var ballast: [[UInt8]] = []
let directory = try PrivateDirectory.makeTemporary(prefix: "memwarn-probe")  // fresh, 0700

@MainActor func load() async throws {
    // "sessions" holds PurgeableData, so its release is checked on the kernel's side too.
    let sessions = DiscardableCache<Int, PurgeableData>()
    sessions.name = "sessions"
    fill(sessions, bytes: 60 * megabyte, entry: 64 << 10, make: purgeable)
    caches.append(sessions)
    for (name, bytes, entry) in [("thumbnails", 40, 256 << 10), ("fragments", 20, 16 << 10)] {
        let cache = DiscardableCache<Int, [UInt8]>()
        cache.name = name
        fill(cache, bytes: bytes * megabyte, entry: entry) { key, count in [UInt8](repeating: UInt8(truncatingIfNeeded: key), count: count) }
        caches.append(cache)
    }
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    let store = MediaStore(name: "media")
    for (name, width, height) in [("poster", 1024, 1024), ("banner", 1024, 512), ("icon", 512, 512)] {
        let path = "\(directory)/\(name).ppm"
        try PortablePixmap.write(width: width, height: height, pixel: { x, y in (UInt8(x & 255), UInt8(y & 255), 128) }, to: path)
        _ = try store.add(name, path: path)
    }
    media = store
    // Its handles' 2 MiB are this process's own buffers, cheap to open again: a release may
    // close any idle one at once (no retention), as the tests of the whole release order want.
    let connections = ResourcePool<Connection>(
        name: "connections", bytesPerHandle: 2 * megabyte, maximumCount: 4, retention: .none,
        open: { try Connection() }, close: { try $0.close() })
    // Open four handles at once, then return them: four idle connections.
    try await withThrowingTaskGroup(of: Void.self) { group in
        for _ in 0..<4 {
            group.addTask { try await connections.withResource { _ in try await Task.sleep(for: .milliseconds(50)) } }
        }
        try await group.waitForAll()
    }
    pool = connections
    var footprints: [String: Int] = [:]
    for consumer in ReleaseCoordinator.shared.consumers { footprints[consumer.name] = consumer.footprintBytes }
    reply(["footprints": footprints])
}

@MainActor func startWatching() async throws {
    var logger = Logger(label: "memwarn-release-probe")
    logger.logLevel = .critical
    // As the README makes one: the process environment (systemd's MEMORY_PRESSURE_WATCH and
    // MEMORY_PRESSURE_WRITE) reaches the monitor, and a control service (MEMWARN_CONTROL=off
    // withholds it) serves `memwarn trigger`.
    let running = PressureMonitor(configuration: MonitorConfiguration(), logger: logger)
    let control = ControlService(monitor: running, logger: logger)
    ReleaseCoordinator.shared.addReportObserver { report in reply(report) }
    ReleaseCoordinator.shared.attach(to: running)
    monitor = running
    var events = running.events().makeAsyncIterator()
    Task { try await running.run() }
    Task { await control.run() }
    guard let first = await events.next() else { throw Failure(error: "the monitor ended at once") }
    let socket = await control.started()
    struct Watching: Encodable {
        var watching: String
        var sources: [String]
        var pid: Int32
        var socket: String?
    }
    reply(Watching(watching: first.level.rawValue, sources: running.watchedSources, pid: getpid(), socket: socket))
}

while let line = readLine() {
    let words = line.split(separator: " ").map(String.init)
    do {
        switch words.first {
        case "load": try await load()
        case "release":
            guard words.count == 3, let level = MemoryPressureLevel(rawValue: words[1]), let target = Int(words[2]) else {
                throw Failure(error: "usage: release <normal|warning|critical> <bytes>")
            }
            reply(ReleaseCoordinator.shared.release(level: level, targetBytes: target))
        case "watch": try await startWatching()
        case "ballast":
            guard words.count == 2, let bytes = Int(words[1]) else { throw Failure(error: "usage: ballast <bytes>") }
            ballast.append([UInt8](repeating: 1, count: bytes))
            reply(["ballast": ballast.reduce(0) { $0 + $1.count }])
        case "exit":
            try? FileManager.default.removeItem(atPath: directory)
            exit(0)
        default: throw Failure(error: "unknown command \"\(line)\"")
        }
    } catch {
        reply(Failure(error: "\(error)"))
    }
}
try? FileManager.default.removeItem(atPath: directory)

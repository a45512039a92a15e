import MemwarnControl
import MemwarnSystem

/// The control directories a node agent searches, watched: a socket made in one is seen when it
/// appears (inotify), not at the next search; so is a directory a pattern comes to match (a new
/// pod's `/run/memwarn/pods/<uid>/memwarn`). A full search — every pattern expanded, every
/// directory listed — runs at the start, when the kernel's queue overflowed, when a directory
/// on a pattern's way changes, and every ``searchInterval`` as the fallback for what inotify
/// cannot see (a directory it may not watch, `ENOSPC` when the user's watches are used up).
///
/// Only directories that nobody but their owner can change are searched (``DirectoryTrust``).
/// Confined to the agent's loop.
final class ControlDirectoryWatch {
    /// What the watch reports, on the loop's thread.
    struct Reports {
        /// A socket appeared, or a search found it.
        var appeared: (String) -> Void
        /// A socket went.
        var disappeared: (String) -> Void
        /// A directory is not searched, and why (said by the caller once while it is there).
        var untrusted: (_ directory: String, _ reason: String) -> Void
    }

    /// How often every directory is listed again whatever inotify says.
    static let searchInterval = Duration.seconds(5)
    /// How often, when inotify cannot be had at all.
    static let searchIntervalWithoutInotify = Duration.seconds(1)

    private let patterns: [String]
    private let loop: EventLoop
    private let reports: Reports
    private var inotify: Inotify?
    private var registration: EventLoop.Registration?
    /// The socket directories watched, by watch number, and the sockets each holds.
    private var directories: [Int32: String] = [:]
    private var sockets: [String: Set<String>] = [:]
    /// Directories on a pattern's way (the parent of one not made yet, each directory a
    /// pattern's partial path matches), each with the name pattern of the next step: an entry
    /// of that name made or removed there starts a search.
    private var waypoints: [Int32: Waypoint] = [:]

    struct Waypoint: Hashable {
        var directory: String
        var next: String
    }
    private var searchDeadline: EventLoop.Deadline?
    /// Why the watch is less than it should be, when it is (for the `watching` line).
    private(set) var shortfall: String?

    init(patterns: [String], loop: EventLoop, reports: Reports) {
        self.patterns = patterns
        self.loop = loop
        self.reports = reports
    }

    /// Starts watching and searches at once.
    func start() {
        loop.preconditionOnLoop()
        do {
            let watch = Inotify(try InotifyWatch(modificationsOf: []))
            registration = try loop.watch(watch.events.descriptor, for: .readable) { [unowned self] _ in drain() }
            inotify = watch
        } catch {
            shortfall = "inotify cannot be had (\(error)): the control directories are listed every \(Self.searchIntervalWithoutInotify)"
        }
        search()
    }

    /// Stops watching. Loop thread.
    func stop() {
        if let registration { loop.unwatch(registration) }
        registration = nil
        inotify = nil
        if let searchDeadline { loop.cancel(searchDeadline) }
        searchDeadline = nil
    }

    /// Every socket known in the watched directories now.
    var knownSockets: Set<String> { sockets.values.reduce(into: Set()) { $0.formUnion($1) } }

    // MARK: Events

    private func drain() {
        guard let inotify else { return }
        let events: [InotifyWatch.Event]
        do {
            events = try inotify.events.events()
        } catch {
            searchSoon()
            return
        }
        var searchNeeded = false
        for event in events {
            if event.isOverflow {
                searchNeeded = true
            } else if let directory = directories[event.watch] {
                if event.endsWatch {
                    directories[event.watch] = nil
                    for socket in sockets.removeValue(forKey: directory) ?? [] { reports.disappeared(socket) }
                    searchNeeded = true
                } else if event.isAppearance {
                    appeared(directory + "/" + event.name, in: directory)
                } else if event.isDisappearance {
                    let path = directory + "/" + event.name
                    if sockets[directory]?.remove(path) != nil { reports.disappeared(path) }
                }
            } else if let way = waypoints[event.watch] {
                if event.endsWatch {
                    waypoints[event.watch] = nil
                    searchNeeded = true
                } else if FileSystem.name(event.name, matches: way.next) {
                    searchNeeded = true
                }
            }
        }
        if searchNeeded { searchSoon() }
    }

    private func appeared(_ path: String, in directory: String) {
        guard ControlDirectory.pid(ofSocket: path) != nil, FileType.at(path, followingLinks: false) == .socket else { return }
        guard sockets[directory, default: []].insert(path).inserted else { return }
        reports.appeared(path)
    }

    /// A search within a few milliseconds (events come in bursts: one search for the burst).
    private func searchSoon() {
        if let searchDeadline { loop.cancel(searchDeadline) }
        searchDeadline = loop.schedule(at: loop.now + .milliseconds(5)) { [unowned self] in
            searchDeadline = nil
            search()
        }
    }

    // MARK: Searching

    /// Expands every pattern, watches the directories found (and the ways to those not made
    /// yet), lists each, and reports what appeared and went since the last search.
    private func search() {
        if let searchDeadline { loop.cancel(searchDeadline) }
        var found: [String] = []
        var ways: Set<Waypoint> = []
        for pattern in patterns {
            let matched = Self.expand(pattern)
            ways.formUnion(Self.waypoints(of: pattern))
            for directory in matched where !found.contains(directory) {
                guard let type = FileType.at(directory, followingLinks: false) else { continue }  // not made yet: found once it is
                if let refusal = DirectoryTrust.refusal(of: directory, type: type) {
                    reports.untrusted(directory, refusal)
                    continue
                }
                found.append(directory)
            }
        }
        // Directories no longer found: their sockets go.
        for (watch, directory) in directories where !found.contains(directory) {
            inotify?.events.removeWatch(watch)
            directories[watch] = nil
        }
        for directory in sockets.keys where !found.contains(directory) {
            for socket in sockets.removeValue(forKey: directory) ?? [] { reports.disappeared(socket) }
        }
        for directory in found {
            if !directories.values.contains(directory), let inotify {
                do {
                    directories[try inotify.events.watchChanges(of: directory)] = directory
                } catch {
                    shortfall = "\(directory) cannot be watched (\(error)): it is listed every \(Self.searchInterval)"
                }
            }
            let listed = Set(ControlClient.socketPaths(in: directory))
            let before = sockets[directory] ?? []
            for gone in before.subtracting(listed) { reports.disappeared(gone) }
            sockets[directory] = listed
            for socket in listed.subtracting(before).sorted() { reports.appeared(socket) }
        }
        if let inotify {
            for (watch, way) in waypoints where !ways.contains(way) {
                inotify.events.removeWatch(watch)
                waypoints[watch] = nil
            }
            for way in ways where !waypoints.values.contains(way) {
                if let watch = try? inotify.events.watchChanges(of: way.directory) { waypoints[watch] = way }
            }
        }
        let interval = inotify == nil ? Self.searchIntervalWithoutInotify : Self.searchInterval
        searchDeadline = loop.schedule(at: loop.now + interval) { [unowned self] in
            searchDeadline = nil
            search()
        }
    }

    /// A directory, or every directory a pattern with `*` matches (`/run/memwarn/pods/*/memwarn`:
    /// one per pod), matched afresh at each search.
    static func expand(_ pattern: String) -> [String] {
        guard isPattern(pattern) else { return [pattern] }
        return FileSystem.paths(matching: pattern).filter { FileType.at($0, followingLinks: false) == .directory }
    }

    /// The directories whose changes can make a pattern match something new, each with the
    /// name of its next step: the parent of a directory not made yet, and every directory a
    /// partial pattern matches (`/run/memwarn/pods` with `*`, and each `/run/memwarn/pods/<uid>`
    /// that has no `memwarn` yet, for `/run/memwarn/pods/*/memwarn`). A directory that exists
    /// needs none: its own watch says when it goes.
    static func waypoints(of pattern: String) -> Set<Waypoint> {
        let components = pattern.split(separator: "/").map(String.init)
        var ways: Set<Waypoint> = []
        var prefix = ""
        for next in components {
            let directories = isPattern(prefix) ? expand(prefix) : [prefix.isEmpty ? "/" : prefix]
            for directory in directories where FileType.at(directory, followingLinks: false) == .directory {
                if isPattern(next) || FileType.at(directory == "/" ? "/" + next : directory + "/" + next, followingLinks: false) == nil {
                    ways.insert(Waypoint(directory: directory, next: next))
                }
            }
            prefix += "/" + next
        }
        return ways
    }

    private static func isPattern(_ path: String) -> Bool {
        path.contains("*") || path.contains("?") || path.contains("[")
    }
}

/// The inotify instance, held by reference (the watch is not copyable).
private final class Inotify {
    let events: InotifyWatch

    init(_ events: consuming InotifyWatch) {
        self.events = events
    }
}

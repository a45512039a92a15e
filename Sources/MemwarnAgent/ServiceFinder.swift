import CgroupKit
import MemwarnControl
import MemwarnSystem

#if canImport(Glibc)
import Glibc
#endif

/// Finds the memwarn services under the parent: every `<pid>.sock` in the control directories,
/// asked for its status, kept when the process that listens (its `SO_PEERCRED` pid) is in a
/// memory cgroup at or below the parent. A socket already known is not asked again while it
/// exists and its process lives: a search is a directory listing, and costs an exchange only
/// for a new socket; the new ones are asked together (``ControlClient/exchangeEach``), so a
/// search costs at most one timeout (its caller's) whatever the sockets do. Also lists the parent's child
/// cgroups that hold no such service (services that do not link memwarn): listed, never asked.
///
/// Only directories that nobody but their owner can change are searched (``DirectoryTrust``).
struct ServiceFinder {
    let directories: [String]
    let parent: CgroupLocation?
    let files: KernelFiles

    /// What one search found.
    struct Search {
        var services: [AgentService] = []
        /// Sockets of services outside the parent, with their pids.
        var outside: [String: Int32] = [:]
        /// Sockets that failed, each with why and when.
        var failures: [(socket: String, reason: String, at: ContinuousClock.Instant)] = []
        /// Directories not searched, with why.
        var untrusted: [(directory: String, reason: String)] = []
        /// The parent's children with no service, with their usage.
        var unlinked: [(cgroup: String, usageBytes: UInt64)] = []
    }

    /// One search; its new sockets' exchanges are bounded by `timeout` together.
    func search(known: [AgentService], skipping skipped: Set<String>, timeout: Duration) -> Search {
        var found = Search()
        var asked: [String] = []
        for pattern in directories {
            for directory in Self.expand(pattern) where !skipped.contains(directory) {
                // Unlike `memwarn trigger`, the agent does not trust a directory for its owner: it
                // believes only the pid the kernel gives for a socket, and that pid's cgroup. A
                // directory that someone other than its owner may change is not searched.
                guard let type = FileType.at(directory, followingLinks: false) else { continue }  // not made yet: searched once it is
                if let refusal = DirectoryTrust.refusal(of: directory, type: type) {
                    found.untrusted.append((directory, refusal))
                    continue
                }
                for socket in ControlClient.socketPaths(in: directory) where !skipped.contains(socket) {
                    if let service = known.first(where: { $0.socketPath == socket }), Signals.processExists(service.pid) {
                        if !found.services.contains(where: { $0.pid == service.pid }) { found.services.append(service) }
                    } else {
                        asked.append(socket)
                    }
                }
            }
        }
        guard !asked.isEmpty else {
            found.unlinked = unlinked(besides: found.services)
            return found
        }
        let discovery = CgroupDiscovery(files: files)
        var admitted: [String: AgentService] = [:]
        var listeners: [String: Int32] = [:]
        let outcomes = ControlClient.exchangeEach(ControlRequest.status.line, with: asked, timeout: timeout) { (socket, peer) throws(ControlError) in
            listeners[socket] = peer.pid
            admitted[socket] = try admit(peer, socket: socket, discovery: discovery)
        }
        let now = ContinuousClock.now
        for (socket, outcome) in outcomes.sorted(by: { $0.key < $1.key }) {
            switch outcome {
            case .failure(let error) where error.code == .serviceOutOfScope:
                found.outside[socket] = listeners[socket]  // another subtree's service: not ours, not asked again while it lives
            case .failure(let error):
                found.failures.append((socket, "\(error)", now))
            case .success(let exchange):
                guard case .status = try? ControlReply(line: Array(exchange.reply.utf8)) else {
                    found.failures.append((socket, "\(ControlError(.unexpectedReply, "answered status with something else"))", now))
                    continue
                }
                if let service = admitted[socket], !found.services.contains(where: { $0.pid == service.pid }) { found.services.append(service) }
            }
        }
        found.unlinked = unlinked(besides: found.services)
        return found
    }

    private static let outside = "outside the parent: "

    /// A directory, or every directory a pattern with `*` matches (`/run/memwarn/pods/*/memwarn`:
    /// one per pod, each pod's endpoint named by its pid inside the pod), matched afresh at each search.
    static func expand(_ pattern: String) -> [String] {
        guard pattern.contains("*") || pattern.contains("?") || pattern.contains("[") else { return [pattern] }
        return FileSystem.paths(matching: pattern).filter { FileType.at($0, followingLinks: false) == .directory }
    }

    /// The service an endpoint's peer is, if its memory cgroup lies under the parent.
    private func admit(_ peer: PeerCredentials, socket: String, discovery: CgroupDiscovery) throws(ControlError) -> AgentService {
        let layout: CgroupLayout
        do {
            // The parent's mount first: in a container the host's tree, bind-mounted beside the
            // container's own cgroup mount, shows the services outside the container's cgroup
            // namespace, and another mount of the hierarchy may show a cgroup under another name.
            layout = try discovery.layout(pid: peer.pid, preferringMountAt: parent?.mountPoint)
        } catch {
            throw ControlError(.serviceUnreadable, "the cgroup of process \(peer.pid) (listening on \(socket)) could not be read: \(error)")
        }
        guard let memory = layout.memory else { throw ControlError(.serviceUnreadable, "process \(peer.pid) has no memory cgroup") }
        if let parent {
            guard memory.mountPoint == parent.mountPoint, parent.path == "/" || memory.path == parent.path || memory.path.hasPrefix(parent.path + "/") else {
                throw ControlError(.serviceOutOfScope, Self.outside + "process \(peer.pid) is in \(memory.path)")
            }
        }
        return AgentService(pid: peer.pid, uid: peer.uid, socketPath: socket, cgroup: memory)
    }

    /// The parent's children that hold none of the services (nor any below them), with usage.
    private func unlinked(besides services: [AgentService]) -> [(cgroup: String, usageBytes: UInt64)] {
        guard let parent, let entries = try? FileSystem.entries(of: files.path(parent.directory)) else { return [] }
        var found: [(String, UInt64)] = []
        for entry in entries where entry.type == .directory {
            let child = parent.child(entry.name)
            guard !services.contains(where: { $0.cgroup.path == child.path || $0.cgroup.path.hasPrefix(child.path + "/") }),
                let usage = try? CgroupMemoryReader(location: child, files: files).usage()
            else { continue }
            found.append((child.path, usage))
        }
        return found.sorted { $0.1 > $1.1 }
    }
}

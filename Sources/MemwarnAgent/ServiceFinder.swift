import CgroupKit
import Memwarn
import MemwarnSystem

#if canImport(Glibc)
import Glibc
#endif

/// Finds the memwarn services under the parent: every `<pid>.sock` in the control directories,
/// asked for its status, kept when the process that listens (its `SO_PEERCRED` pid) is in a
/// memory cgroup at or below the parent. A socket already known is not asked again while it
/// exists and its process lives: a search is a directory listing, and costs an exchange only
/// for a new socket. Also lists the parent's child cgroups that hold no such
/// service (services that do not link memwarn): listed, never asked.
struct ServiceFinder {
    let directories: [String]
    let parent: CgroupLocation?
    let files: KernelFiles
    let timeout: Duration

    /// One search.
    ///
    /// - Returns: the services found, the sockets that failed (path and why), and the unlinked
    ///   children of the parent (path and usage).
    func search(known: [AgentService], skipping skipped: Set<String>)
        -> (services: [AgentService], outside: [String: Int32], failures: [(socket: String, reason: String)], unlinked: [(cgroup: String, usageBytes: UInt64)])
    {
        var services: [AgentService] = []
        var outside: [String: Int32] = [:]
        var failures: [(String, String)] = []
        let discovery = CgroupDiscovery(files: files)
        for directory in directories.flatMap(Self.expand) where !skipped.contains(directory) {
            // Unlike `memwarn trigger`, the agent does not trust a directory for its owner: it
            // believes only the pid the kernel gives for a socket, and that pid's cgroup. A
            // directory of any user is searched; a symbolic link is not followed.
            guard let type = FileType.at(directory, followingLinks: false) else { continue }  // not made yet: searched once it is
            guard type == .directory else {
                failures.append((directory, "not searched: not a directory (a symbolic link is not followed)"))
                continue
            }
            for socket in ControlClient.socketPaths(in: directory) where !skipped.contains(socket) {
                if let service = known.first(where: { $0.socketPath == socket }), Signals.processExists(service.pid) {
                    services.append(service)
                    continue
                }
                var found: AgentService?
                var listener: Int32 = 0
                do {
                    let exchange = try ControlClient.exchange(ControlRequest.status.line, with: socket, timeout: timeout) { (peer) throws(ControlError) in
                        listener = peer.pid
                        found = try admit(peer, socket: socket, discovery: discovery)
                    }
                    guard case .status = try ControlReply(line: Array(exchange.reply.utf8)) else {
                        throw ControlError(.unexpectedReply, "answered status with something else")
                    }
                } catch let error as ControlError where error.code == .serviceOutOfScope {
                    outside[socket] = listener  // another subtree's service: not ours, not asked again while it lives
                    continue
                } catch {
                    failures.append((socket, "\(error)"))
                    continue
                }
                if let found, !services.contains(where: { $0.pid == found.pid }) { services.append(found) }
            }
        }
        return (services, outside, failures, unlinked(besides: services))
    }

    private static let outside = "outside the parent: "

    /// A directory, or every directory a pattern with `*` matches (`/run/memwarn/pods/*/memwarn`:
    /// one per pod, each pod's endpoint named by its pid inside the pod), matched afresh at each search.
    static func expand(_ pattern: String) -> [String] {
        guard pattern.contains("*") || pattern.contains("?") || pattern.contains("[") else { return [pattern] }
        return FileSystem.paths(matching: pattern).filter { FileType.at($0) == .directory }
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

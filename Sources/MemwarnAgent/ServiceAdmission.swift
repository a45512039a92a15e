import CgroupKit
import MemwarnControl
import MemwarnSystem

/// Who a socket's listener is, as the kernel says: its pid (`SO_PEERCRED`, never what the
/// endpoint says) and that pid's memory cgroup (`/proc/PID/cgroup`), which must lie at or below
/// the parent. Known the moment a connect succeeds, before any reply: a crossing never waits for a
/// service's status to rank and ask it. Also lists the parent's children that hold no service
/// (services that do not link memwarn): listed, never asked. Every usage is measured as the
/// parent's is: less the inactive page cache when the policy leaves it out, so that a service's
/// share and what no service holds are told in the parent's measure.
struct ServiceAdmission {
    let parent: CgroupLocation?
    let files: KernelFiles
    /// Whether a cgroup's usage is taken less its inactive file pages
    /// (`inactive_page_cache = ignore`), as the parent's is.
    let leavesOutInactiveFile: Bool

    /// Why a listener is not admitted.
    enum Refusal: Error {
        /// Its cgroup is outside the parent: another subtree's service.
        case outside(String)
        /// Its cgroup cannot be read.
        case unreadable(String)
    }

    /// The service a socket's listener is, if its memory cgroup lies under the parent.
    func admit(_ peer: PeerCredentials, socket: String) -> Result<AgentService, Refusal> {
        let layout: CgroupLayout
        do {
            // The parent's mount first: in a container the host's tree, bind-mounted beside the
            // container's own cgroup mount, shows the services outside the container's cgroup
            // namespace, and another mount of the hierarchy may show a cgroup under another name.
            layout = try CgroupDiscovery(files: files).layout(pid: peer.pid, preferringMountAt: parent?.mountPoint)
        } catch {
            return .failure(.unreadable("the cgroup of process \(peer.pid) (listening on \(socket)) could not be read: \(error)"))
        }
        guard let memory = layout.memory else { return .failure(.unreadable("process \(peer.pid) has no memory cgroup")) }
        if let parent {
            guard memory.mountPoint == parent.mountPoint, parent.path == "/" || memory.path == parent.path || memory.path.hasPrefix(parent.path + "/") else {
                return .failure(.outside("outside the parent: process \(peer.pid) is in \(memory.path)"))
            }
        }
        return .success(AgentService(pid: peer.pid, uid: peer.uid, socketPath: socket, cgroup: memory))
    }

    /// A service's kernel-measured usage: its memory cgroup's, unless another service shares the
    /// cgroup (or it is the parent itself), then its resident set (`/proc/PID/statm`, which counts
    /// the file pages the process maps and no other page cache).
    func usage(of service: AgentService, among services: some Collection<AgentService>) -> UInt64? {
        let shared = service.cgroup == parent || services.contains { $0.pid != service.pid && $0.cgroup == service.cgroup }
        if !shared, let usage = usage(of: service.cgroup) { return usage }
        guard let text = try? files.read("/proc/\(service.pid)/statm") else { return nil }
        let fields = text.split(separator: " ")
        guard fields.count > 1, let pages = UInt64(fields[1]) else { return nil }
        return pages &* UInt64(VirtualMemory.pageSize)
    }

    /// The parent's children that hold none of the services (nor any below them), with usage,
    /// the largest first.
    func unlinked(besides services: some Collection<AgentService>) -> [(cgroup: String, usageBytes: UInt64)] {
        guard let parent, let entries = try? FileSystem.entries(of: files.path(parent.directory)) else { return [] }
        var found: [(String, UInt64)] = []
        for entry in entries where entry.type == .directory {
            let child = parent.child(entry.name)
            guard !services.contains(where: { $0.cgroup.path == child.path || $0.cgroup.path.hasPrefix(child.path + "/") }),
                let usage = usage(of: child)
            else { continue }
            found.append((child.path, usage))
        }
        return found.sorted { $0.1 > $1.1 }
    }

    /// A cgroup's usage in the parent's measure, or `nil` when it cannot be read.
    private func usage(of cgroup: CgroupLocation) -> UInt64? {
        try? CgroupMemoryReader(location: cgroup, files: files).measuredUsage(leavingOutInactiveFile: leavesOutInactiveFile).bytes
    }
}

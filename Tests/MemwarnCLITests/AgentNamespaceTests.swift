import CgroupKit
import Foundation
import MemwarnTestKit
import MemwarnTestTraits
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `memwarn agent` as a least-privilege DaemonSet runs it, for real on this host's v1 memory
/// hierarchy: in a private cgroup namespace (`unshare --cgroup --mount`) rooted two levels below
/// this process's own memory cgroup, with the hierarchy bind-mounted read-only at a temporary
/// `…/host/sys/fs/cgroup/memory`, its own `/sys/fs/cgroup/memory` a fresh mount (root `/`, as a
/// container's), and the service's control directory bind-mounted read-only under
/// `…/host/run/memwarn/pods/p1/memwarn`. The service, in a child of the limited parent, is then
/// written `/../../<parent>/service` in the agent's `/proc/PID/cgroup` and the host mount's
/// root `/..` repeated: the agent must still find it.
@Suite(.tags(.root, .cgroupV1), .needsRealCgroups, .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/unshare"), "needs util-linux's unshare"))
struct AgentNamespaceTests {
    static let memwarn = ChildProcess.productsDirectory + "/memwarn"

    /// Run by `sh -c` in the new namespaces (`$1` the temporary host root, `$2` the parent's path
    /// in the hierarchy, `$3` the control directory, `$4` the service's pid, `$5` memwarn): makes
    /// the container's mounts, prints what the agent's namespace sees as a `view` line, then
    /// becomes the agent.
    static let container = #"""
        set -e
        mkdir -p "$1/sys/fs/cgroup/memory" "$1/run/memwarn/pods/p1/memwarn"
        host=$(realpath "$1") parent=$2 control=$3 peer=$4 memwarn=$5
        mount --bind /sys/fs/cgroup/memory "$host/sys/fs/cgroup/memory"
        mount -o remount,bind,ro "$host/sys/fs/cgroup/memory"
        mount --bind "$control" "$host/run/memwarn/pods/p1/memwarn"
        mount -o remount,bind,ro "$host/run/memwarn/pods/p1/memwarn"
        umount -l /sys/fs/cgroup/memory
        mount -t cgroup -o memory memwarn-test /sys/fs/cgroup/memory
        hostRoot=$(awk -v m="$host/sys/fs/cgroup/memory" '$5 == m { print $4 }' /proc/self/mountinfo)
        ownRoot=$(awk '$5 == "/sys/fs/cgroup/memory" { print $4 }' /proc/self/mountinfo)
        seen=$(grep ':memory:' "/proc/$peer/cgroup" | cut -d: -f3-)
        printf '{"event":"view","hostRoot":"%s","ownRoot":"%s","peer":"%s"}\n' "$hostRoot" "$ownRoot" "$seen"
        exec "$memwarn" agent --cgroup "$host/sys/fs/cgroup/memory$parent" --control-dir "$host/run/memwarn/pods/*/memwarn" --json
        """#

    @Test func anAgentInAPrivateCgroupNamespaceFindsAServiceOutsideItThroughTheHostsTreeMountedReadOnly() async throws {
        let own = try #require(try CgroupDiscovery().layout().memory)
        let scratch = try AgentCommandTests.privateDirectory()
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let control = scratch + "/control"
        try FileManager.default.createDirectory(atPath: control, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        // The agent's namespace root, beside the parent: <own>/memwarn-agent-ns-…/agent.
        let agentHome = try TestCgroup(at: own.child("memwarn-agent-ns-\(getpid())-\(UUID().uuidString.prefix(8))"))
        defer { try? agentHome.remove() }
        let agentCgroup = try agentHome.child("agent")
        defer { try? agentCgroup.remove() }
        try await withTestCgroup(limit: 256 << 20) { parent in
            let serviceCgroup = try parent.child("service")
            defer { try? serviceCgroup.remove() }
            let probe = try LineChild(
                [
                    ChildProcess.productsDirectory + "/memwarn-growth-probe", "--rate", "20", "--total", "20", "--control", control, "--hold", "60",
                ],
                in: serviceCgroup)
            defer { probe.killIfRunning() }
            while !(try await probe.nextLine(within: .seconds(30))).contains(#""event":"control""#) {}

            let agent = try LineChild(
                [
                    "/usr/bin/unshare", "--cgroup", "--mount", "/bin/sh", "-c", Self.container, "sh", scratch + "/host", parent.location.path, control,
                    "\(probe.pid)", Self.memwarn,
                ],
                in: agentCgroup)
            defer { agent.killIfRunning() }
            var records: [[String: Any]] = []
            func next() async throws -> [String: Any] {
                let line = try await agent.nextLine(within: .seconds(30))
                let record = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "\(line) \(agent.standardErrorText)")
                records.append(record)
                return record
            }
            // What the kernel shows the agent: the service above its namespace root, the host's tree
            // from the hierarchy's root, the container's own mount at its namespace root.
            let view = try await next()
            let depth = own.path.split(separator: "/").count + 2
            #expect(view["peer"] as? String == "/../../" + parent.location.path.split(separator: "/").last! + "/service", "\(view)")
            #expect(view["hostRoot"] as? String == String(repeating: "/..", count: depth), "\(view)")
            #expect(view["ownRoot"] as? String == "/", "\(view)")

            while !records.contains(where: { ["found", "unreachable"].contains($0["event"] as? String) }) {
                _ = try await next()
            }
            let found = try #require(records.first { $0["event"] as? String == "found" }, "\(records) \(agent.standardErrorText)")
            #expect(found["pid"] as? Int == Int(probe.pid), "\(found)")
            #expect(found["cgroup"] as? String == serviceCgroup.location.path, "placed under the host's tree by its path there: \(found)")
            let started = try #require(records.first { $0["event"] as? String == "started" })
            #expect((started["measure"] as? String)?.contains(parent.location.path) == true, "the parent is read through the read-only mount: \(started)")
            agent.signal(SIGTERM)
            #expect(try await agent.exitStatus(within: .seconds(10)) == 0, "\(agent.standardErrorText)")
        }
    }
}

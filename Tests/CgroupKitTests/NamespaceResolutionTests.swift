import Testing

@testable import CgroupKit

#if canImport(Glibc)
import Glibc
#endif

/// What a node agent sees from a container with a private cgroup namespace (a Kubernetes
/// DaemonSet with `hostPID` and the host's cgroup tree bind-mounted read-only at
/// `/host/sys/fs/cgroup`): its own cgroup mount with root `/`, the host's with root `/..` four
/// times (the namespace root is four levels down), and peers' `/proc/PID/cgroup` paths written
/// relative to the agent's namespace root, as the kernel writes them (checked on this machine's
/// v1 memory hierarchy: a bind mount's root `/../../../../..` and a sibling's `4:memory:/../../svc`).
/// The tree is a ``ScratchTree``; this test process is the agent (its pid is listed in the
/// namespace root's `cgroup.procs`).
struct DaemonSetView {
    let tree: ScratchTree
    let version: CgroupVersion
    /// The host's tree as the container mounts it.
    let hostMount: String
    /// The container's own mount of the hierarchy (root `/`, the namespace root).
    let ownMount: String
    /// The namespace root `N`, inside the host's tree.
    static let namespaceRoot = "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-poda.slice/cri-containerd-a.scope"
    static let own = getpid()

    /// The view on `version` (v1: a hybrid host's memory hierarchy), its host mount's root `hostRoot`.
    init(_ version: CgroupVersion, hostRoot: String = "/../../../..") throws {
        tree = try ScratchTree()
        self.version = version
        let options: String
        switch version {
        case .v2:
            (ownMount, hostMount, options) = ("/sys/fs/cgroup", "/host/sys/fs/cgroup", "- cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot")
        case .v1:
            (ownMount, hostMount, options) = ("/sys/fs/cgroup/memory", "/host/sys/fs/cgroup/memory", "- cgroup cgroup rw,memory")
        }
        var mountinfo = """
            1398 1234 0:154 / / rw,relatime master:589 - overlay overlay rw,lowerdir=/l,upperdir=/u,workdir=/w
            1399 1398 0:156 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw
            1403 1398 0:159 / /sys ro,nosuid,nodev,noexec,relatime - sysfs sysfs ro

            """
        if version == .v1 {
            mountinfo += """
                1404 1403 0:26 / /sys/fs/cgroup ro,nosuid,nodev,noexec - tmpfs tmpfs ro,mode=755,inode64
                1405 1404 0:27 / /sys/fs/cgroup/unified ro,nosuid,nodev,noexec,relatime - cgroup2 cgroup2 rw
                1406 1404 0:32 / /sys/fs/cgroup/cpu,cpuacct ro,nosuid,nodev,noexec,relatime - cgroup cgroup rw,cpu,cpuacct
                1407 1404 0:35 / \(ownMount) ro,nosuid,nodev,noexec,relatime - cgroup cgroup rw,memory
                1420 1398 0:35 \(hostRoot) \(hostMount) ro,relatime master:14 - cgroup cgroup rw,memory

                """
        } else {
            mountinfo += """
                1404 1403 0:27 / \(ownMount) ro,nosuid,nodev,noexec,relatime \(options)
                1420 1398 0:27 \(hostRoot) \(hostMount) ro,relatime master:9 \(options)

                """
        }
        try tree.write("/proc/self/mountinfo", mountinfo)
        try tree.write("/proc/self/cgroup", line("/"))
        try tree.write(ownMount + "/cgroup.procs", "\(Self.own)\n")
        if version == .v2 {
            try tree.write(hostMount + "/cgroup.controllers", "cpuset cpu io memory hugetlb pids rdma misc\n")
            try tree.write(ownMount + "/cgroup.controllers", "cpu io memory pids\n")
        }
        try cgroup("/", procs: [1])
        try cgroup(Self.namespaceRoot, procs: [Self.own, 2006])
        try cgroup("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-poda.slice/cri-containerd-b.scope", procs: [2001])
        try cgroup("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podb.slice/cri-containerd-c.scope", procs: [2002])
        // Same leaf name as the namespace root, another pod: identity is by pid, not by name.
        try cgroup("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podb.slice/cri-containerd-a.scope", procs: [2005])
        try cgroup("/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-podd.slice/cri-containerd-d.scope", procs: [2003])
        try cgroup("/system.slice/containerd.service", procs: [2004])
    }

    /// A `/proc/PID/cgroup` line for the hierarchy (v1: with a cpu line before it, and the
    /// cgroup2 line at the namespace root).
    func line(_ path: String) -> String {
        version == .v2 ? "0::\(path)\n" : "5:cpu,cpuacct:/\n4:memory:\(path)\n0::/\n"
    }

    /// A cgroup directory of the host's tree with its `cgroup.procs` (its ancestors get an empty one).
    func cgroup(_ path: String, procs: [Int32] = []) throws {
        var ancestor = ""
        for name in path.split(separator: "/").dropLast() {
            ancestor += "/" + name
            if !tree.files.exists(hostMount + ancestor + "/cgroup.procs") { try tree.write(hostMount + ancestor + "/cgroup.procs", "") }
        }
        let directory = path == "/" ? hostMount : hostMount + path
        try tree.write(directory + "/cgroup.procs", procs.map { "\($0)\n" }.joined())
        try tree.write(directory + "/memory." + (version == .v2 ? "current" : "usage_in_bytes"), "4096\n")
    }

    /// A peer process whose `/proc/PID/cgroup` names `path`.
    func peer(_ pid: Int32, at path: String) throws {
        try tree.write("/proc/\(pid)/cgroup", line(path))
    }

    var discovery: CgroupDiscovery { tree.discovery }
}

@Suite("Cgroups outside a private cgroup namespace, placed under the host's tree (a DaemonSet)")
struct NamespaceResolutionTests {
    struct Peer: Sendable, CustomTestStringConvertible {
        var pid: Int32
        var written: String
        var placed: String
        var testDescription: String { written }
    }

    static let peers: [Peer] = [
        .init(
            pid: 2001, written: "/../cri-containerd-b.scope",
            placed: "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-poda.slice/cri-containerd-b.scope"),
        .init(
            pid: 2002, written: "/../../kubepods-burstable-podb.slice/cri-containerd-c.scope",
            placed: "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podb.slice/cri-containerd-c.scope"),
        .init(
            pid: 2003, written: "/../../../kubepods-besteffort.slice/kubepods-besteffort-podd.slice/cri-containerd-d.scope",
            placed: "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-podd.slice/cri-containerd-d.scope"),
        .init(pid: 2004, written: "/../../../../system.slice/containerd.service", placed: "/system.slice/containerd.service"),
        .init(pid: 2007, written: "/../../../..", placed: "/"),
    ]

    // MARK: Peers j = 1...k levels up, on v2 and v1

    @Test("A peer written with j leading .. (1 ≤ j ≤ k = 4) is the namespace root's first k − j names, then the rest, under the host's mount", arguments: peers)
    func peerIsPlacedUnderTheHostMount(peer: Peer) throws {
        for version in [CgroupVersion.v2, .v1] {
            let view = try DaemonSetView(version)
            try view.peer(peer.pid, at: peer.written)
            let layout = try view.discovery.layout(pid: peer.pid)
            #expect(layout.memory == CgroupLocation(version: version, mountPoint: view.hostMount, path: peer.placed), "\(version)")
            if version == .v1 { #expect(layout.unified == CgroupLocation(version: .v2, mountPoint: "/sys/fs/cgroup/unified", path: "/")) }
        }
    }

    @Test("The namespace root is found by this process's pid at its own cgroup path, when that is below the root")
    func ownCgroupBelowTheNamespaceRoot() throws {
        let view = try DaemonSetView(.v1)  // v1 allows a process in a child of the namespace root beside others in it
        try view.tree.write("/proc/self/cgroup", view.line("/agent"))
        try view.cgroup(DaemonSetView.namespaceRoot, procs: [2006])
        try view.cgroup(DaemonSetView.namespaceRoot + "/agent", procs: [DaemonSetView.own])
        try view.peer(2002, at: "/../../kubepods-burstable-podb.slice/cri-containerd-c.scope")
        #expect(
            try view.discovery.layout(pid: 2002).memory?.path == "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podb.slice/cri-containerd-c.scope"
        )
    }

    @Test("A peer inside the namespace (j = 0) is placed under the preferred mount, else under the first that shows it")
    func peerInsideTheNamespaceTakesThePreferredMount() throws {
        for version in [CgroupVersion.v2, .v1] {
            let view = try DaemonSetView(version)
            try view.peer(2006, at: "/")
            #expect(try view.discovery.layout(pid: 2006).memory == CgroupLocation(version: version, mountPoint: view.ownMount, path: "/"))
            let preferred = try view.discovery.layout(pid: 2006, preferringMountAt: view.hostMount).memory
            #expect(preferred == CgroupLocation(version: version, mountPoint: view.hostMount, path: DaemonSetView.namespaceRoot), "\(version)")
            try view.peer(2002, at: "/../../kubepods-burstable-podb.slice/cri-containerd-c.scope")
            #expect(try view.discovery.layout(pid: 2002, preferringMountAt: view.hostMount).memory?.mountPoint == view.hostMount)
        }
    }

    // MARK: What cannot be placed exactly

    @Test("A peer more levels up than the host mount's root lies outside every mount")
    func peerAboveTheHostMountIsOutside() throws {
        let view = try DaemonSetView(.v2)
        try view.peer(2008, at: "/../../../../../x")
        let error = expectError(.outsideNamespace, naming: "/../../../../../x") { () throws(CgroupError) in
            try view.discovery.layout(pid: 2008, preferringMountAt: view.hostMount)
        }
        #expect(
            error?.message.contains("5 levels above this cgroup namespace's root, above the mount's root /../../../..") == true, "\(String(describing: error))")
    }

    @Test("A peer path with .. after a name is malformed", arguments: ["/../a/../b", "/../../kubepods-burstable-podb.slice/..", "/../.", "/../a/./b"])
    func dotDotAfterANameIsMalformed(path: String) throws {
        let view = try DaemonSetView(.v2)
        try view.peer(2009, at: path)
        let error = expectError(.malformed, naming: path) { () throws(CgroupError) in try view.discovery.layout(pid: 2009) }
        #expect(error?.message.contains("may only lead a cgroup path") == true, "\(String(describing: error))")
    }

    @Test("With no cgroup k levels down holding this process, a peer outside the namespace cannot be placed")
    func namespaceRootNotFound() throws {
        let view = try DaemonSetView(.v1)
        try view.cgroup(DaemonSetView.namespaceRoot, procs: [2006])
        try view.peer(2002, at: "/../../kubepods-burstable-podb.slice/cri-containerd-c.scope")
        let error = expectError(.outsideNamespace, naming: "/../../kubepods-burstable-podb.slice/cri-containerd-c.scope") { () throws(CgroupError) in
            try view.discovery.layout(pid: 2002, preferringMountAt: view.hostMount)
        }
        #expect(error?.message.contains("must be found under /host/sys/fs/cgroup/memory") == true, "\(String(describing: error))")
        #expect(error?.message.contains("no cgroup 4 levels down holds pid \(DaemonSetView.own)") == true, "\(String(describing: error))")
    }

    @Test("Two cgroups k levels down listing this process make the namespace root ambiguous")
    func namespaceRootAmbiguous() throws {
        let view = try DaemonSetView(.v2)
        try view.cgroup("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podb.slice/cri-containerd-a.scope", procs: [DaemonSetView.own])
        try view.peer(2001, at: "/../cri-containerd-b.scope")
        let error = expectError(.outsideNamespace, naming: "/../cri-containerd-b.scope") { () throws(CgroupError) in try view.discovery.layout(pid: 2001) }
        #expect(error?.message.contains("more than one cgroup 4 levels down holds pid") == true, "\(String(describing: error))")
    }

    @Test("A peer placed where no cgroup is (it has gone) is not found, naming where it was placed")
    func placedCgroupMissing() throws {
        let view = try DaemonSetView(.v2)
        try view.peer(2010, at: "/../cri-containerd-gone.scope")
        let error = expectError(.notFound, naming: "/../cri-containerd-gone.scope") { () throws(CgroupError) in try view.discovery.layout(pid: 2010) }
        #expect(
            error?.message.contains("/host/sys/fs/cgroup/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-poda.slice/cri-containerd-gone.scope")
                == true)
    }

    @Test("This process's own cgroup outside its namespace cannot find the namespace root")
    func ownCgroupOutsideItsNamespace() throws {
        let view = try DaemonSetView(.v2)
        try view.tree.write("/proc/self/cgroup", "0::/../elsewhere\n")
        try view.peer(2001, at: "/../cri-containerd-b.scope")
        let error = expectError(.outsideNamespace, naming: "/../cri-containerd-b.scope") { () throws(CgroupError) in try view.discovery.layout(pid: 2001) }
        #expect(error?.message.contains("this process's own cgroup /../elsewhere lies outside its cgroup namespace") == true, "\(String(describing: error))")
    }

    @Test(
        "A host mount whose root is not /.. repeated cannot show a peer above the namespace root",
        arguments: [("/docker/abc", CgroupError.Code.outsideNamespace), ("/", .outsideNamespace), ("/../../sibling", .notFound)])
    func mountRootNotAllDotDot(root: String, code: CgroupError.Code) throws {
        let view = try DaemonSetView(.v2, hostRoot: root)
        try view.peer(2002, at: "/../../kubepods-burstable-podb.slice/cri-containerd-c.scope")
        let error = caughtError { () throws(CgroupError) in try view.discovery.layout(pid: 2002, preferringMountAt: view.hostMount) }
        // No mount shows it: the reason given is the first mount's, the preferred one.
        #expect(error?.code == code, "\(String(describing: error))")
        #expect(
            error?.message.contains("mount root \(root)") == true || error?.message.contains("mount's root \(root) ") == true, "\(String(describing: error))")
    }

    @Test("On a hybrid host a cgroup2 group no mount shows is left out with a note; the v1 memory cgroup is placed")
    func hybridUnifiedOutsideIsANote() throws {
        let view = try DaemonSetView(.v1)
        try view.tree.write("/proc/2002/cgroup", "4:memory:/../../kubepods-burstable-podb.slice/cri-containerd-c.scope\n0::/../../x\n")
        let layout = try view.discovery.layout(pid: 2002)
        #expect(layout.memory?.path == "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podb.slice/cri-containerd-c.scope")
        #expect(layout.unified == nil)
        #expect(layout.notes.contains { $0.contains("the cgroup2 group /../../x is left out") }, "\(layout.notes)")
    }

    @Test("On cgroup v2 a group no mount shows is still an error (it is the memory cgroup)")
    func v2OutsideWithoutHostMountIsAnError() throws {
        let view = try DaemonSetView(.v2, hostRoot: "/")
        try view.peer(2001, at: "/../cri-containerd-b.scope")
        expectError(.outsideNamespace, naming: "/../cri-containerd-b.scope") { () throws(CgroupError) in try view.discovery.layout(pid: 2001) }
    }

    // MARK: resolve, alone

    @Test("resolve: j leading .. under a mount root of k .. (j ≤ k) is beside the namespace root")
    func resolveBesideNamespaceRoot() throws {
        #expect(try CgroupDiscovery.resolve(cgroupPath: "/../svc", mountRoot: "/../..") == .besideNamespaceRoot(up: 1, depth: 2, rest: "/svc"))
        #expect(try CgroupDiscovery.resolve(cgroupPath: "/../../a/b", mountRoot: "/../../..") == .besideNamespaceRoot(up: 2, depth: 3, rest: "/a/b"))
        #expect(try CgroupDiscovery.resolve(cgroupPath: "/../..", mountRoot: "/../..") == .besideNamespaceRoot(up: 2, depth: 2, rest: "/"))
        #expect(try CgroupDiscovery.resolve(cgroupPath: "/a", mountRoot: "/../..") == .belowUnnamedAncestors(depth: 2, rest: "/a"))
    }

    @Test("resolve: what a mount cannot show, and .. after a name")
    func resolveRefusals() {
        expectError(.outsideNamespace, naming: "/../../../x") { () throws(CgroupError) in
            try CgroupDiscovery.resolve(cgroupPath: "/../../../x", mountRoot: "/../..")
        }
        expectError(.outsideNamespace, naming: "/../x") { () throws(CgroupError) in try CgroupDiscovery.resolve(cgroupPath: "/../x", mountRoot: "/docker/abc") }
        expectError(.notFound, naming: "/../x") { () throws(CgroupError) in try CgroupDiscovery.resolve(cgroupPath: "/../x", mountRoot: "/../sibling") }
        expectError(.malformed, naming: "/a/../b") { () throws(CgroupError) in try CgroupDiscovery.resolve(cgroupPath: "/a/../b", mountRoot: "/") }
        expectError(.malformed, naming: "/x") { () throws(CgroupError) in try CgroupDiscovery.resolve(cgroupPath: "/x", mountRoot: "/../a/..") }
    }
}

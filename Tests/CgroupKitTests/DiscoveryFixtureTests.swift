import Testing

@testable import CgroupKit

@Suite("CgroupDiscovery on fixture trees")
struct DiscoveryFixtureTests {
    // MARK: Modes and layouts of whole hosts

    @Test("Only cgroup and cgroup2 mounts are kept from mountinfo")
    func onlyCgroupMountsAreKept() throws {
        let v1 = try Fixture.discovery("v1-host").mounts()
        #expect(v1.count == 11)
        #expect(v1.allSatisfy { $0.fileSystemType == "cgroup" })
        let hybrid = try Fixture.discovery("hybrid-host").mounts()
        #expect(hybrid.count == 13)
        #expect(hybrid.filter { $0.fileSystemType == "cgroup2" }.map(\.mountPoint) == ["/sys/fs/cgroup/unified"])
    }

    @Test("A pure v1 host has mode v1, its memory cgroup in the memory hierarchy and no unified group")
    func pureV1HostLayout() throws {
        let layout = try Fixture.discovery("v1-host").layout()
        #expect(layout.mode == .v1)
        #expect(layout.memory == CgroupLocation(version: .v1, mountPoint: "/sys/fs/cgroup/memory", path: "/system.slice/app.service"))
        #expect(layout.unified == nil)
        #expect(layout.notes.isEmpty)
    }

    /// runc on a hybrid host mounts the v1 hierarchies only, but the kernel writes the `0::` line
    /// once cgroup2 is mounted anywhere on the host: the unified group has no mount to be placed
    /// in, and memory, on v1, does not need it (found by running `memwarn status` in runc here).
    @Test("A container on a hybrid host sees a 0:: line but no cgroup2 mount: the memory cgroup is placed, the unified group left out with a note")
    func containerOnHybridHostWithoutCgroup2Mount() throws {
        let tree = try ScratchTree(copying: "v1-host")
        let cgroup = try String(contentsOfFile: tree.root + "/proc/self/cgroup", encoding: .utf8)
        try tree.write("/proc/self/cgroup", cgroup + "0::/\n")
        let layout = try tree.discovery.layout()
        #expect(layout.mode == .v1)
        #expect(layout.memory == CgroupLocation(version: .v1, mountPoint: "/sys/fs/cgroup/memory", path: "/system.slice/app.service"))
        #expect(layout.unified == nil)
        #expect(layout.notes.contains { $0.contains("the cgroup2 group / is left out") }, "\(layout.notes)")
    }

    @Test("A pure cgroup2 host has mode v2 and its memory cgroup is its unified group")
    func pureV2HostLayout() throws {
        let layout = try Fixture.discovery("v2-host").layout()
        let expected = CgroupLocation(version: .v2, mountPoint: "/sys/fs/cgroup", path: "/system.slice/app.service")
        #expect(layout.mode == .v2)
        #expect(layout.memory == expected)
        #expect(layout.unified == expected)
        #expect(layout.memory?.directory == "/sys/fs/cgroup/system.slice/app.service")
    }

    @Test("A hybrid host has mode hybrid, memory on v1 and the unified group in /sys/fs/cgroup/unified")
    func hybridHostLayout() throws {
        let layout = try Fixture.discovery("hybrid-host").layout()
        #expect(layout.mode == .hybrid)
        #expect(layout.memory?.version == .v1)
        #expect(layout.memory == CgroupLocation(version: .v1, mountPoint: "/sys/fs/cgroup/memory", path: "/system.slice/app.service"))
        #expect(layout.unified == CgroupLocation(version: .v2, mountPoint: "/sys/fs/cgroup/unified", path: "/system.slice/app.service"))
        #expect(layout.unified?.file("memory.pressure") == "/sys/fs/cgroup/unified/system.slice/app.service/memory.pressure")
    }

    @Test("A cgroup2 hierarchy without the memory controller gives no memory cgroup")
    func cgroup2WithoutMemoryControllerGivesNoMemoryCgroup() throws {
        let tree = try ScratchTree(copying: "v2-host")
        try tree.write("/sys/fs/cgroup/cgroup.controllers", "cpuset cpu io hugetlb pids rdma misc\n")
        let layout = try tree.discovery.layout()
        #expect(layout.mode == .v2)
        #expect(layout.memory == nil)
        #expect(layout.unified?.path == "/system.slice/app.service")
    }

    // MARK: Cgroup namespaces

    @Test("In a namespace whose mount root is /../.., the namespace root is the one cgroup two levels down holding the pid")
    func namespaceRootIsFoundByPid() throws {
        let layout = try Fixture.discovery("container-ns").layout(pid: 48213)
        let expected = CgroupLocation(version: .v2, mountPoint: "/sys/fs/cgroup", path: "/kubepods.slice/pod123")
        #expect(layout.mode == .v2)
        #expect(layout.unified == expected)
        #expect(layout.memory == expected)
    }

    @Test("In a namespace whose mount root is /../.., the decoy sibling's pid finds the decoy")
    func decoySiblingPidFindsTheDecoy() throws {
        let tree = try ScratchTree(copying: "container-ns")
        try tree.write("/proc/47990/cgroup", "0::/\n")
        #expect(try tree.discovery.layout(pid: 47990).memory?.path == "/kubepods.slice/pod456")
    }

    @Test("In a namespace whose mount root is /../.., a pid held by no cgroup at that depth lies outside the namespace")
    func pidHeldByNoCgroupIsOutsideNamespace() {
        let error = expectError(.outsideNamespace, naming: "/") { () throws(CgroupError) in
            try Fixture.discovery("container-ns").layout(pid: 7)
        }
        #expect(error?.message.contains("no cgroup 2 levels down holds pid 7") == true)
    }

    @Test("In a namespace whose mount root is /../.., a pid listed by two cgroups is ambiguous")
    func pidListedTwiceIsAmbiguous() throws {
        let tree = try ScratchTree(copying: "container-ns")
        try tree.write("/sys/fs/cgroup/kubepods.slice/pod456/cgroup.procs", "47990\n48002\n48213\n")
        let error = expectError(.outsideNamespace, naming: "/") { () throws(CgroupError) in
            try tree.discovery.layout(pid: 48213)
        }
        #expect(error?.message.contains("more than one") == true)
    }

    @Test("A container whose cgroup2 mount root is / has its memory cgroup at the mount root")
    func containerWithOwnMountHasMemoryAtMountRoot() throws {
        let layout = try Fixture.discovery("container-ns-root").layout()
        let expected = CgroupLocation(version: .v2, mountPoint: "/sys/fs/cgroup", path: "/")
        #expect(layout.mode == .v2)
        #expect(layout.memory == expected)
        #expect(layout.unified == expected)
        #expect(layout.memory?.file("memory.max") == "/sys/fs/cgroup/memory.max")
    }

    @Test("A /proc/self/cgroup path climbing out of the namespace is outside the namespace and names the path")
    func pathClimbingOutIsOutsideNamespace() throws {
        let tree = try ScratchTree(copying: "v2-host")
        try tree.write("/proc/self/cgroup", "0::/../../x\n")
        let error = expectError(.outsideNamespace, naming: "/../../x") { () throws(CgroupError) in try tree.discovery.layout() }
        #expect(error?.message.contains("outside this process's cgroup namespace") == true)
    }

    // MARK: Broken hosts

    @Test("A host without cgroup mounts is unsupported and names its mountinfo")
    func hostWithoutCgroupMountsIsUnsupported() throws {
        let tree = try ScratchTree()
        try tree.write(
            "/proc/self/mountinfo",
            """
            23 1 259:1 / / rw,noatime shared:1 - xfs /dev/nvme0n1p1 rw,attr2,inode64,noquota
            19 23 0:4 / /proc rw,nosuid,nodev,noexec,relatime shared:5 - proc proc rw
            18 23 0:17 / /sys rw,nosuid,nodev,noexec,relatime shared:6 - sysfs sysfs rw

            """)
        try tree.write("/proc/self/cgroup", "0::/\n")
        expectError(.unsupported, naming: tree.path("/proc/self/mountinfo")) { () throws(CgroupError) in try tree.discovery.layout() }
        expectError(.unsupported, naming: tree.path("/proc/self/mountinfo")) { () throws(CgroupError) in
            try tree.discovery.layout(cgroupPath: "/")
        }
    }

    @Test("A missing mountinfo is not found and names the file")
    func missingMountinfoIsNotFound() throws {
        let tree = try ScratchTree()
        expectError(.notFound, naming: tree.path("/proc/self/mountinfo")) { () throws(CgroupError) in try tree.discovery.layout() }
    }

    @Test("A mountinfo line without the separator makes discovery fail naming mountinfo")
    func mountinfoWithoutSeparatorFailsDiscovery() throws {
        let tree = try ScratchTree(copying: "v2-host")
        try tree.write("/proc/self/mountinfo", "33 22 0:27 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 cgroup2 cgroup2 rw\n")
        expectError(.malformed, naming: tree.path("/proc/self/mountinfo")) { () throws(CgroupError) in try tree.discovery.layout() }
    }

    @Test("A v1 memory hierarchy without a memory line in /proc/self/cgroup is malformed")
    func v1WithoutMemoryLineIsMalformed() throws {
        let tree = try ScratchTree(copying: "v1-host")
        try tree.write("/proc/self/cgroup", "3:cpu,cpuacct:/system.slice/app.service\n1:name=systemd:/system.slice/app.service\n")
        let error = expectError(.malformed, naming: tree.path("/proc/self/cgroup")) { () throws(CgroupError) in
            try tree.discovery.layout()
        }
        #expect(error?.message.contains("no memory line") == true)
    }

    @Test("A garbled /proc/self/cgroup is malformed and names the file")
    func garbledProcCgroupIsMalformed() throws {
        let tree = try ScratchTree(copying: "v2-host")
        try tree.write("/proc/self/cgroup", "0::system.slice/app.service\n")
        expectError(.malformed, naming: tree.path("/proc/self/cgroup")) { () throws(CgroupError) in try tree.discovery.layout() }
    }

    @Test("A pid without a /proc/PID/cgroup is not found and names that file")
    func missingProcPidCgroupIsNotFound() {
        let files = Fixture.files("v2-host")
        expectError(.notFound, naming: files.path("/proc/31337/cgroup")) { () throws(CgroupError) in
            try Fixture.discovery("v2-host").layout(pid: 31337)
        }
    }

    // MARK: Cgroups named by the operator (--cgroup)

    @Test("A cgroup named as in /proc/PID/cgroup is found in the v1 memory hierarchy")
    func cgroupNamedByProcPathOnV1() throws {
        let layout = try Fixture.discovery("v1-host").layout(cgroupPath: "/system.slice/app.service")
        #expect(layout.mode == .v1)
        #expect(layout.memory == CgroupLocation(version: .v1, mountPoint: "/sys/fs/cgroup/memory", path: "/system.slice/app.service"))
        #expect(layout.unified == nil)
    }

    @Test("A cgroup named by its absolute path under the v1 memory mount is the same cgroup")
    func cgroupNamedByAbsolutePathOnV1() throws {
        let layout = try Fixture.discovery("v1-host").layout(cgroupPath: "/sys/fs/cgroup/memory/system.slice/app.service")
        #expect(layout.memory == CgroupLocation(version: .v1, mountPoint: "/sys/fs/cgroup/memory", path: "/system.slice/app.service"))
    }

    @Test("The absolute path of a mount point names the mount's root cgroup")
    func mountPointNamesRootCgroup() throws {
        let layout = try Fixture.discovery("v2-host").layout(cgroupPath: "/sys/fs/cgroup")
        #expect(layout.memory == CgroupLocation(version: .v2, mountPoint: "/sys/fs/cgroup", path: "/"))
    }

    @Test("Doubled and trailing slashes in a named cgroup are ignored")
    func extraSlashesAreIgnored() throws {
        let layout = try Fixture.discovery("v2-host").layout(cgroupPath: "//system.slice///app.service/")
        #expect(layout.memory?.path == "/system.slice/app.service")
    }

    @Test("A cgroup named on a cgroup2 host is both the memory and the unified cgroup")
    func cgroupNamedOnV2() throws {
        for name in ["/system.slice", "/sys/fs/cgroup/system.slice"] {
            let layout = try Fixture.discovery("v2-host").layout(cgroupPath: name)
            let expected = CgroupLocation(version: .v2, mountPoint: "/sys/fs/cgroup", path: "/system.slice")
            #expect(layout.mode == .v2)
            #expect(layout.memory == expected, "\(name)")
            #expect(layout.unified == expected, "\(name)")
        }
    }

    @Test("A cgroup named on a hybrid host gets its v1 memory cgroup and its unified group")
    func cgroupNamedOnHybrid() throws {
        let layout = try Fixture.discovery("hybrid-host").layout(cgroupPath: "/system.slice/app.service")
        #expect(layout.mode == .hybrid)
        #expect(layout.memory == CgroupLocation(version: .v1, mountPoint: "/sys/fs/cgroup/memory", path: "/system.slice/app.service"))
        #expect(layout.unified == CgroupLocation(version: .v2, mountPoint: "/sys/fs/cgroup/unified", path: "/system.slice/app.service"))
    }

    @Test("A cgroup named by an absolute path inside a namespace is found without a pid")
    func absolutePathInsideNamespace() throws {
        let layout = try Fixture.discovery("container-ns").layout(cgroupPath: "/sys/fs/cgroup/kubepods.slice/pod123")
        #expect(layout.memory == CgroupLocation(version: .v2, mountPoint: "/sys/fs/cgroup", path: "/kubepods.slice/pod123"))
    }

    @Test("A cgroup named relative to a namespace whose mount root is above it cannot be placed")
    func namespaceRelativePathCannotBePlaced() {
        let error = expectError(.outsideNamespace, naming: "/kubepods.slice/pod123") { () throws(CgroupError) in
            try Fixture.discovery("container-ns").layout(cgroupPath: "/kubepods.slice/pod123")
        }
        #expect(error?.message.contains("/sys/fs/cgroup") == true)
    }

    @Test(
        "A named cgroup path with .. is malformed",
        arguments: [
            "/system.slice/../user.slice", "/..", "/sys/fs/cgroup/memory/../cpu", "system.slice/app.service", "",
        ])
    func namedPathWithDotDotIsMalformed(name: String) {
        expectError(.malformed, naming: name) { () throws(CgroupError) in
            try Fixture.discovery("v1-host").layout(cgroupPath: name)
        }
    }

    struct MissingCgroup: Sendable, CustomTestStringConvertible {
        var fixture: String
        var name: String
        var directory: String
        var testDescription: String { "\(name) on \(fixture)" }
    }

    @Test(
        "A named cgroup that does not exist is not found and names its directory",
        arguments: [
            MissingCgroup(fixture: "v1-host", name: "/system.slice/gone.service", directory: "/sys/fs/cgroup/memory/system.slice/gone.service"),
            MissingCgroup(fixture: "v1-host", name: "/sys/fs/cgroup/memory/gone", directory: "/sys/fs/cgroup/memory/gone"),
            MissingCgroup(fixture: "v2-host", name: "/system.slice/gone.service", directory: "/sys/fs/cgroup/system.slice/gone.service"),
            MissingCgroup(fixture: "hybrid-host", name: "/user.slice", directory: "/sys/fs/cgroup/memory/user.slice"),
        ])
    func namedCgroupMissingIsNotFound(missing: MissingCgroup) {
        let expected = Fixture.files(missing.fixture).path(missing.directory)
        expectError(.notFound, naming: expected) { () throws(CgroupError) in
            try Fixture.discovery(missing.fixture).layout(cgroupPath: missing.name)
        }
    }

    @Test("A named cgroup on a host without a memory controller has no memory controller")
    func namedCgroupWithoutMemoryController() throws {
        let tree = try ScratchTree(copying: "v2-host")
        try tree.write("/sys/fs/cgroup/cgroup.controllers", "cpu io pids\n")
        let error = expectError(.noMemoryController, naming: "/system.slice") { () throws(CgroupError) in
            try tree.discovery.layout(cgroupPath: "/system.slice")
        }
        #expect(error?.message.contains("mode v2") == true)
    }

    // MARK: Resolving paths against mount roots

    @Test("A cgroup path below a mount root resolves inside the mount")
    func pathBelowMountRootResolvesInside() throws {
        #expect(try CgroupDiscovery.resolve(cgroupPath: "/docker/abc/sub", mountRoot: "/docker/abc") == .inside("/sub"))
        #expect(try CgroupDiscovery.resolve(cgroupPath: "/docker/abc", mountRoot: "/docker/abc") == .inside("/"))
        #expect(try CgroupDiscovery.resolve(cgroupPath: "/a/b", mountRoot: "/") == .inside("/a/b"))
    }

    @Test("A mount root of /../.. puts the cgroup below two unnamed ancestors")
    func dotDotMountRootGivesUnnamedAncestors() throws {
        #expect(try CgroupDiscovery.resolve(cgroupPath: "/", mountRoot: "/../..") == .belowUnnamedAncestors(depth: 2, rest: "/"))
        #expect(try CgroupDiscovery.resolve(cgroupPath: "/worker", mountRoot: "/..") == .belowUnnamedAncestors(depth: 1, rest: "/worker"))
    }

    @Test("A cgroup beside the mount root is not found in that mount")
    func pathBesideMountRootIsNotFound() {
        expectError(.notFound, naming: "/other") { () throws(CgroupError) in
            try CgroupDiscovery.resolve(cgroupPath: "/other", mountRoot: "/docker/abc")
        }
        expectError(.notFound, naming: "/x") { () throws(CgroupError) in
            try CgroupDiscovery.resolve(cgroupPath: "/x", mountRoot: "/../sibling")
        }
        expectError(.notFound, naming: "/docker/abcdef") { () throws(CgroupError) in
            try CgroupDiscovery.resolve(cgroupPath: "/docker/abcdef", mountRoot: "/docker/abc")
        }
    }
}

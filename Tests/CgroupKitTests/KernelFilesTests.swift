import Testing

@testable import CgroupKit

@Suite("KernelFiles and CgroupLocation")
struct KernelFilesTests {
    @Test("Host paths are placed below the root, and a trailing slash on the root is dropped")
    func hostPathsArePlacedBelowRoot() {
        #expect(KernelFiles(root: "/tmp/tree/").path("/proc/self/cgroup") == "/tmp/tree/proc/self/cgroup")
        #expect(KernelFiles(root: "/tmp/tree").path("/proc/self/cgroup") == "/tmp/tree/proc/self/cgroup")
        #expect(KernelFiles.host.path("/proc/self/cgroup") == "/proc/self/cgroup")
        #expect(KernelFiles(root: "/").root == "/")
    }

    @Test("A fixture tree's files exist and are read as on a host")
    func fixtureFilesAreRead() throws {
        let files = Fixture.files("v2-host")
        #expect(files.exists("/sys/fs/cgroup/system.slice/app.service/memory.max"))
        #expect(!files.exists("/sys/fs/cgroup/system.slice/app.service/memory.limit_in_bytes"))
        #expect(try files.read("/sys/fs/cgroup/system.slice/memory.max") == "536870912\n")
    }

    @Test("A directory lists its names sorted, without . and ..")
    func directoryListsSortedNames() throws {
        let names = try Fixture.files("container-ns").list("/sys/fs/cgroup/kubepods.slice")
        #expect(names.filter { !$0.contains(".") } == ["pod123", "pod456"])
        #expect(names == names.sorted())
        #expect(!names.contains(".") && !names.contains(".."))
    }

    @Test("A missing file is not found and the error names its real path")
    func missingFileIsNotFound() {
        let files = Fixture.files("v2-host")
        let error = expectError(.notFound, naming: files.path("/sys/fs/cgroup/memory.max")) { () throws(CgroupError) in
            try files.read("/sys/fs/cgroup/memory.max")
        }
        #expect(error?.errno != nil)
    }

    @Test("Writing a control file that does not exist is not found and creates nothing")
    func writingMissingFileIsNotFound() throws {
        let tree = try ScratchTree(copying: "v2-host")
        let file = "/sys/fs/cgroup/system.slice/app.service/cgroup.kill"
        expectError(.notFound, naming: tree.path(file)) { () throws(CgroupError) in try tree.files.write("1", to: file) }
        #expect(!tree.files.exists(file))
    }

    @Test("Writing an existing control file replaces its text")
    func writingExistingFile() throws {
        let tree = try ScratchTree(copying: "v2-host")
        let file = "/sys/fs/cgroup/system.slice/app.service/memory.high"
        try tree.files.write("300000000", to: file)
        #expect(try tree.files.read(file).hasPrefix("300000000"))
    }

    @Test("A location's parent climbs one level and stops at the mount root")
    func parentClimbsToMountRoot() {
        let app = CgroupLocation(version: .v2, mountPoint: "/sys/fs/cgroup", path: "/system.slice/app.service")
        #expect(app.parent?.path == "/system.slice")
        #expect(app.parent?.parent?.path == "/")
        #expect(app.parent?.parent?.parent == nil)
        #expect(app.parent?.parent?.directory == "/sys/fs/cgroup")
    }

    @Test("A location's child, directory and files are host paths under its mount")
    func childDirectoryAndFiles() {
        let root = CgroupLocation(version: .v1, mountPoint: "/sys/fs/cgroup/memory", path: "/")
        #expect(root.file("memory.stat") == "/sys/fs/cgroup/memory/memory.stat")
        let child = root.child("system.slice").child("app.service")
        #expect(child.path == "/system.slice/app.service")
        #expect(child.directory == "/sys/fs/cgroup/memory/system.slice/app.service")
        #expect(child.file("memory.limit_in_bytes") == "/sys/fs/cgroup/memory/system.slice/app.service/memory.limit_in_bytes")
    }

    @Test("An error's description is its path, a colon and its message")
    func errorDescriptionNamesPath() {
        #expect(CgroupError(.malformed, "line 3 has no value", path: "/x/memory.stat").description == "/x/memory.stat: line 3 has no value")
        #expect(CgroupError(.unsupported, "no cgroups").description == "no cgroups")
        #expect(CgroupError.Code.outsideNamespace.description == "outsideNamespace")
    }
}

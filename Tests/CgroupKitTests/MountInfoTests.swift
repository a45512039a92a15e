import Testing

@testable import CgroupKit

@Suite("MountEntry and mountinfo")
struct MountInfoTests {
    let path = "/proc/self/mountinfo"

    func fixtureMounts(_ name: String) throws -> [MountEntry] {
        let files = Fixture.files(name)
        return try MountEntry.parse(files.read(path), path: files.path(path))
    }

    @Test("Every line of a real host's mountinfo parses")
    func everyLineOfARealHostParses() throws {
        let entries = try fixtureMounts("hybrid-host")
        #expect(entries.count == 32)
        #expect(entries.first == MountEntry(root: "/", mountPoint: "/sys", fileSystemType: "sysfs", superOptions: ["rw"]))
    }

    @Test("The cgroup2 line gives root, mount point, type and super options after the separator")
    func cgroup2LineGivesItsFields() throws {
        let cgroup2 = try fixtureMounts("v2-host").filter { $0.fileSystemType == "cgroup2" }
        #expect(
            cgroup2 == [
                MountEntry(
                    root: "/", mountPoint: "/sys/fs/cgroup", fileSystemType: "cgroup2",
                    superOptions: ["rw", "nsdelegate", "memory_recursiveprot"])
            ])
    }

    @Test("A v1 mount's super options name its controllers, not its mount options")
    func v1SuperOptionsNameControllers() throws {
        let entries = try fixtureMounts("v1-host")
        let memory = try #require(entries.first { $0.mountPoint == "/sys/fs/cgroup/memory" })
        #expect(memory.fileSystemType == "cgroup")
        #expect(memory.superOptions == ["rw", "memory"])
        let cpu = try #require(entries.first { $0.mountPoint == "/sys/fs/cgroup/cpu,cpuacct" })
        #expect(cpu.superOptions == ["rw", "cpu", "cpuacct"])
        let systemd = try #require(entries.first { $0.mountPoint == "/sys/fs/cgroup/systemd" })
        #expect(systemd.superOptions.last == "name=systemd")
    }

    @Test("A line without optional fields, as in containers, still parses")
    func lineWithoutOptionalFieldsParses() throws {
        let cgroup2 = try #require(try fixtureMounts("container-ns").first { $0.fileSystemType == "cgroup2" })
        #expect(cgroup2.root == "/../..")
        #expect(cgroup2.mountPoint == "/sys/fs/cgroup")
    }

    @Test("A line with several optional fields finds the separator after them")
    func severalOptionalFieldsAreSkipped() throws {
        let text = "36 25 0:31 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 master:3 propagate_from:2 unbindable - cgroup2 cgroup2 rw,nsdelegate\n"
        let entries = try MountEntry.parse(text, path: path)
        #expect(entries == [MountEntry(root: "/", mountPoint: "/sys/fs/cgroup", fileSystemType: "cgroup2", superOptions: ["rw", "nsdelegate"])])
    }

    @Test("Octal escapes for space, tab, newline and backslash are decoded in root and mount point")
    func octalEscapesAreDecoded() throws {
        let text = #"40 34 0:38 /my\040group /mnt/cgroup\040v1\011tab\012nl\134bs rw,relatime shared:20 - cgroup cgroup rw,memory"# + "\n"
        let entry = try #require(try MountEntry.parse(text, path: path).first)
        #expect(entry.root == "/my group")
        #expect(entry.mountPoint == "/mnt/cgroup v1\ttab\nnl\\bs")
    }

    @Test("A backslash not followed by three octal digits is kept as written")
    func strayBackslashIsKept() throws {
        let text = #"40 34 0:38 / /mnt/a\9b\04 rw - cgroup2 cgroup2 rw"# + "\n"
        let entry = try #require(try MountEntry.parse(text, path: path).first)
        #expect(entry.mountPoint == #"/mnt/a\9b\04"#)
    }

    @Test("A line without the separator is malformed and names the file")
    func lineWithoutSeparatorIsMalformed() {
        let text = "33 22 0:27 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 cgroup2 cgroup2 rw,nsdelegate\n"
        let error = expectError(.malformed, naming: path) { () throws(CgroupError) in try MountEntry.parse(text, path: path) }
        #expect(error?.message.contains("not a mountinfo entry") == true)
    }

    @Test("A line cut short after the separator is malformed")
    func lineCutAfterSeparatorIsMalformed() {
        let text = "22 29 0:21 / /sys rw,nosuid shared:7 - sysfs sysfs rw\n33 22 0:27 / /sys/fs/cgroup rw shared:9 - cgroup2 cgroup2\n"
        expectError(.malformed, naming: path) { () throws(CgroupError) in try MountEntry.parse(text, path: path) }
    }

    @Test("A separator too early for the six fixed fields is malformed")
    func separatorTooEarlyIsMalformed() {
        expectError(.malformed, naming: path) { () throws(CgroupError) in
            try MountEntry.parse("33 22 0:27 / - cgroup2 cgroup2 rw\n", path: path)
        }
    }

    @Test("An empty mountinfo is malformed")
    func emptyMountinfoIsMalformed() {
        expectError(.malformed, naming: path) { () throws(CgroupError) in try MountEntry.parse("\n", path: path) }
    }
}

import Testing

@testable import CgroupKit

@Suite("CgroupMemoryReader on fixture trees")
struct MemoryReaderFixtureTests {
    /// The reader for the memory cgroup discovery finds in a fixture tree.
    func reader(_ fixture: String, pid: Int32? = nil) throws -> CgroupMemoryReader {
        let layout = try Fixture.discovery(fixture).layout(pid: pid)
        let memory = try #require(layout.memory)
        return CgroupMemoryReader(location: memory, files: Fixture.files(fixture))
    }

    func reader(_ fixture: String, _ version: CgroupVersion, _ mountPoint: String, _ path: String) -> CgroupMemoryReader {
        CgroupMemoryReader(location: CgroupLocation(version: version, mountPoint: mountPoint, path: path), files: Fixture.files(fixture))
    }

    // MARK: cgroup v1

    @Test("On v1 an unlimited cgroup under a limited slice gets the slice's limit from hierarchical_memory_limit")
    func v1LimitComesFromHierarchicalMemoryLimit() throws {
        let limit = try reader("v1-host").effectiveLimit()
        #expect(limit == EffectiveLimit(bytes: 268_435_456, file: "hierarchical_memory_limit", cgroupPath: "/system.slice/app.service"))
    }

    @Test("On v1 the slice's own limit file wins over an equal hierarchical_memory_limit")
    func v1OwnLimitWinsTies() throws {
        let limit = try reader("v1-host", .v1, "/sys/fs/cgroup/memory", "/system.slice").effectiveLimit()
        #expect(limit == EffectiveLimit(bytes: 268_435_456, file: "memory.limit_in_bytes", cgroupPath: "/system.slice"))
    }

    @Test("On v1 a cgroup's own limit below its ancestors' is the effective limit")
    func v1OwnLimitIsEffective() throws {
        let limit = try reader("hybrid-host").effectiveLimit()
        #expect(limit == EffectiveLimit(bytes: 67_108_864, file: "memory.limit_in_bytes", cgroupPath: "/system.slice/app.service"))
    }

    @Test("On v1 usage is memory.usage_in_bytes")
    func v1UsageIsUsageInBytes() throws {
        let reader = try reader("v1-host")
        #expect(reader.usageFile == "memory.usage_in_bytes")
        #expect(try reader.usage() == 148_635_648)
        #expect(try self.reader("hybrid-host").usage() == 66_883_584)
    }

    @Test("On v1 memory.stat gives local and total_ keys")
    func v1StatGivesLocalAndTotalKeys() throws {
        let stat = try reader("v1-host").stat()
        #expect(stat.count == 36)
        #expect(stat["rss"] == 104_857_600)
        #expect(stat["total_cache"] == 41_943_040)
        #expect(stat["hierarchical_memsw_limit"] == CgroupValues.v1Unlimited)
        #expect(stat["inactive_file"] == 20_971_520)
    }

    @Test("On v1 events come from memory.oom_control and memory.failcnt")
    func v1EventsComeFromOomControlAndFailcnt() throws {
        let app = try reader("v1-host").events()
        #expect(app.oomKill == 2)
        #expect(app.max == 0)
        #expect(app.low == 0 && app.high == 0 && app.oomGroupKill == 0)
        let slice = try reader("v1-host", .v1, "/sys/fs/cgroup/memory", "/system.slice").events()
        #expect(slice.max == 1342)
        #expect(slice.oomKill == 0)
        #expect(try self.reader("hybrid-host").events().max == 5127)
    }

    // MARK: cgroup v2

    @Test("On v2 the lowest memory.high of an ancestor is the effective limit")
    func v2LimitComesFromAncestorsMemoryHigh() throws {
        let limit = try reader("v2-host").effectiveLimit()
        #expect(limit == EffectiveLimit(bytes: 402_653_184, file: "memory.high", cgroupPath: "/system.slice"))
    }

    @Test("On v2 a cgroup with no limit anywhere up to the mount root has none")
    func v2NoLimitAnywhere() throws {
        #expect(try reader("v2-host", .v2, "/sys/fs/cgroup", "/init.scope").effectiveLimit() == nil)
    }

    @Test("On v2 usage is memory.current")
    func v2UsageIsMemoryCurrent() throws {
        let reader = try reader("v2-host")
        #expect(reader.usageFile == "memory.current")
        #expect(try reader.usage() == 312_147_968)
    }

    @Test("On v2 memory.stat gives the v2 key set")
    func v2StatGivesV2Keys() throws {
        let stat = try reader("v2-host").stat()
        #expect(stat.count == 50)
        for key in ["anon", "file", "kernel", "kernel_stack", "sock", "shmem", "file_mapped", "slab", "inactive_file", "active_file", "pgmajfault"] {
            #expect(stat[key] != nil, "\(key)")
        }
        #expect(stat["anon"] == 251_658_240)
        #expect(stat["inactive_file"] == 31_457_280)
        #expect(stat["rss"] == nil)
        #expect(stat["hierarchical_memory_limit"] == nil)
    }

    @Test("On v2 events are memory.events with every counter")
    func v2EventsAreMemoryEvents() throws {
        let slice = try reader("v2-host", .v2, "/sys/fs/cgroup", "/system.slice").events()
        #expect(slice == MemoryEventCounters(low: 0, high: 84, max: 3, oom: 1, oomKill: 1, oomGroupKill: 0))
        let app = try reader("v2-host").events()
        #expect(app == MemoryEventCounters(oomKill: 1))
    }

    @Test("On v2 memory.pressure of the memory cgroup reads as PSI")
    func v2PressureReads() throws {
        let files = Fixture.files("container-ns")
        let layout = try Fixture.discovery("container-ns").layout(pid: 48213)
        let file = try #require(layout.unified).file("memory.pressure")
        let pressure = try PressureStall.parse(files.read(file), path: files.path(file))
        #expect(pressure.some.avg10 == 6.40)
        #expect(pressure.full?.total == 11_204_533)
    }

    // MARK: Containers

    @Test("In a namespaced container the pod level's lower memory.max is the effective limit")
    func namespacedContainerGetsParentsLowerLimit() throws {
        let reader = try reader("container-ns", pid: 48213)
        #expect(try reader.effectiveLimit() == EffectiveLimit(bytes: 100_663_296, file: "memory.max", cgroupPath: "/kubepods.slice"))
        #expect(try reader.usage() == 73_400_320)
        #expect(try reader.events() == MemoryEventCounters(oomKill: 1))
    }

    @Test("In a namespaced container a child limit below the parent's is its own")
    func namespacedDecoyHasItsOwnLowerLimit() throws {
        let reader = reader("container-ns", .v2, "/sys/fs/cgroup", "/kubepods.slice/pod456")
        #expect(try reader.effectiveLimit() == EffectiveLimit(bytes: 67_108_864, file: "memory.max", cgroupPath: "/kubepods.slice/pod456"))
    }

    @Test("In a container whose mount root is / the limit is memory.max at the mount root")
    func containerLimitAtMountRoot() throws {
        let reader = try reader("container-ns-root")
        #expect(try reader.effectiveLimit() == EffectiveLimit(bytes: 268_435_456, file: "memory.max", cgroupPath: "/"))
        #expect(try reader.usage() == 120_586_240)
    }

    // MARK: Missing controller or cgroup

    @Test("On v2 a cgroup without memory files has no memory controller")
    func v2CgroupWithoutMemoryFiles() throws {
        let tree = try ScratchTree(copying: "v2-host")
        try tree.write("/sys/fs/cgroup/system.slice/app.service/worker/cgroup.procs", "2901\n")
        let reader = CgroupMemoryReader(
            location: CgroupLocation(version: .v2, mountPoint: "/sys/fs/cgroup", path: "/system.slice/app.service/worker"),
            files: tree.files)
        expectError(.noMemoryController, naming: tree.path("/sys/fs/cgroup/system.slice/app.service/worker")) { () throws(CgroupError) in
            try reader.effectiveLimit()
        }
        expectError(.noMemoryController, naming: tree.path("/sys/fs/cgroup/system.slice/app.service/worker/memory.current")) { () throws(CgroupError) in
            try reader.usage()
        }
        expectError(.noMemoryController, naming: tree.path("/sys/fs/cgroup/system.slice/app.service/worker/memory.events")) { () throws(CgroupError) in
            try reader.events()
        }
    }

    @Test("A cgroup that is gone is not found when its usage is read")
    func goneCgroupIsNotFound() {
        let reader = reader("v2-host", .v2, "/sys/fs/cgroup", "/system.slice/gone.service")
        expectError(.notFound, naming: Fixture.files("v2-host").path("/sys/fs/cgroup/system.slice/gone.service/memory.current")) { () throws(CgroupError) in
            try reader.usage()
        }
        let v1 = self.reader("v1-host", .v1, "/sys/fs/cgroup/memory", "/system.slice/gone.service")
        expectError(.notFound, naming: Fixture.files("v1-host").path("/sys/fs/cgroup/memory/system.slice/gone.service/memory.limit_in_bytes")) {
            () throws(CgroupError) in
            try v1.effectiveLimit()
        }
    }

    @Test("On v2 the effective limit of a cgroup that is gone is not found")
    func goneV2CgroupLimitIsNotFound() {
        let reader = reader("v2-host", .v2, "/sys/fs/cgroup", "/system.slice/gone.service")
        expectError(.notFound, naming: Fixture.files("v2-host").path("/sys/fs/cgroup/system.slice/gone.service")) { () throws(CgroupError) in
            try reader.effectiveLimit()
        }
    }

    @Test("System memory comes from /proc/meminfo in bytes")
    func systemMemoryFromMeminfo() throws {
        let files = Fixture.files("v1-host")
        let memory = try SystemMemory.parse(files.read("/proc/meminfo"), path: files.path("/proc/meminfo"))
        #expect(memory.totalBytes == 7_962_672 * 1024)
        #expect(memory.availableBytes == 5_219_876 * 1024)
        #expect(memory.usedBytes == (7_962_672 - 5_219_876) * 1024)
    }
}

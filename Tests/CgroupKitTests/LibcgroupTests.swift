import CLibcgroup
import CgroupKit
import MemwarnTestKit
import MemwarnTestTraits
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// libcgroup on the real cgroup v1 memory hierarchy.
@Suite(.tags(.root, .cgroupV1), .needsRealCgroups)
struct LibcgroupTests {
    @Test func aLimitSetThroughLibcgroupIsTheEffectiveLimitTheReaderSees() async throws {
        try await withTestCgroup(limit: 64 << 20) { cgroup in
            #expect(try CgroupMemoryReader(location: cgroup.location).effectiveLimit()?.bytes == 64 << 20)
            try Libcgroup.setValue(32 << 20, file: "memory.limit_in_bytes", path: cgroup.location.path, controller: "memory")
            let limit = try #require(try CgroupMemoryReader(location: cgroup.location).effectiveLimit())
            #expect(limit.bytes == 32 << 20)
            #expect(limit.file == "memory.limit_in_bytes")
        }
    }

    @Test func libcgroupAndProcAgreeOnThisProcesssMemoryCgroup() throws {
        let viaLibrary = try Libcgroup.currentPath(pid: getpid(), controller: "memory")
        let viaProc = try CgroupMembership.parse(KernelFiles.host.read("/proc/self/cgroup"), path: "/proc/self/cgroup")
            .first { $0.controllers.contains("memory") }?.path
        #expect(viaLibrary == viaProc)
        #expect(try Libcgroup.mountPoint(controller: "memory") == "/sys/fs/cgroup/memory")
    }

    @Test func deletingACgroupThatDoesNotExistIsAnErrorNamingIt() {
        let error = #expect(throws: CgroupError.self) {
            try Libcgroup.deleteCgroup(path: "/memwarn-no-such-cgroup-\(getpid())", controller: "memory")
        }
        #expect(error?.description.contains("memwarn-no-such-cgroup") == true)
    }

    @Test func errorMessagesFromECGEOFOnAreCorrectedForTheOffByOne() {
        #expect(Libcgroup.message(for: Int32(ECGEOF)).lowercased().contains("end of file"))
        #expect(Libcgroup.message(for: Int32(ECGROUPNOTEXIST)).lowercased().contains("not exist"))
    }
}

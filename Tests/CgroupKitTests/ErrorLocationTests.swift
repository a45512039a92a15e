import Testing

@testable import CgroupKit

#if canImport(Glibc)
import Glibc
#endif

/// An error made by a factory recorded the factory's own line, so every `open` failure
/// pointed at the same line of KernelFiles.swift. It now records its caller's line.
@Suite struct ErrorLocationTests {
    @Test func anOpenErrorNamesTheLineThatMadeIt() {
        let line = #line + 1
        let error = KernelFiles.openError(EMFILE, "/sys/fs/cgroup/memory/memory.usage_in_bytes", writing: false)
        #expect(error.file == #fileID && error.line == line, "\(error.debugDescription)")
        #expect(error.code == .unreadable && error.errno == EMFILE)
    }

    @Test func aLibcgroupErrorNamesTheLineThatMadeIt() {
        let line = #line + 1
        let error = Libcgroup.error(50_002, "cgroup_delete_cgroup", path: "/gone")  // ECGROUPNOTEXIST
        #expect(error.file == #fileID && error.line == line, "\(error.debugDescription)")
        #expect(error.path == "/gone")
    }

    @Test func anErrorThrownByAReadNamesTheRead() {
        let error = #expect(throws: CgroupError.self) { try KernelFiles.host.read("/proc/memwarn-no-such-file") }
        #expect(error?.file == "CgroupKit/KernelFiles.swift" && error?.code == .notFound, "\(String(describing: error?.debugDescription))")
    }
}

import Testing

@testable import CgroupKit

/// Usage less the inactive page cache (the policy's `inactive_page_cache = ignore`), read from
/// captured `memory.stat` files of a v1 and a v2 host (v2 memory files cannot be made here) and
/// from the held-open file adaptive sampling reads.
@Suite struct InactivePageCacheTests {
    func reader(_ fixture: String) throws -> CgroupMemoryReader {
        let layout = try Fixture.discovery(fixture).layout()
        return CgroupMemoryReader(location: try #require(layout.memory), files: Fixture.files(fixture))
    }

    @Test func onV1EachLimitsUsageIsLessItsCgroupsTotalInactiveFile() throws {
        let reader = try reader("v1-host")
        #expect(reader.inactiveFileKey == "total_inactive_file")
        let counted = try reader.constraints()
        let slice = try #require(counted.first { $0.cgroupPath == "/system.slice" })
        #expect(slice.usageBytes == 255_852_544 && slice.inactiveFileBytes == nil)
        let leftOut = try #require(try reader.constraints(leavingOutInactiveFile: true).first { $0.cgroupPath == "/system.slice" })
        // The slice's total_inactive_file (its children's included), not its own inactive_file (0).
        #expect(leftOut.inactiveFileBytes == 31_457_280)
        #expect(leftOut.usageBytes == 255_852_544 - 31_457_280)
        #expect(leftOut.limit == slice.limit)
    }

    @Test func onV2EachLimitsUsageIsLessItsCgroupsInactiveFile() throws {
        let reader = try reader("v2-host")
        #expect(reader.inactiveFileKey == "inactive_file")
        let slice = try #require(try reader.constraints(leavingOutInactiveFile: true).first { $0.cgroupPath == "/system.slice" })
        #expect(slice.inactiveFileBytes == 35_232_153)
        #expect(slice.usageBytes == 398_458_880 - 35_232_153)
        #expect(slice.limit.bytes == 402_653_184)
        #expect(try reader.measuredUsage(leavingOutInactiveFile: true) == .init(bytes: 312_147_968 - 31_457_280, inactiveFileBytes: 31_457_280))
    }

    @Test func inactivePageCacheAboveUsageLeavesNothingNotAWrappedNumber() throws {
        let tree = try ScratchTree(copying: "v2-host")
        try tree.write("/sys/fs/cgroup/system.slice/app.service/memory.current", "1000\n")
        let reader = CgroupMemoryReader(
            location: CgroupLocation(version: .v2, mountPoint: "/sys/fs/cgroup", path: "/system.slice/app.service"), files: tree.files)
        #expect(try reader.measuredUsage(leavingOutInactiveFile: true).bytes == 0)
    }

    @Test func aStatWithoutTheKeyIsMalformedNamingTheFile() throws {
        let tree = try ScratchTree(copying: "v2-host")
        try tree.write("/sys/fs/cgroup/system.slice/app.service/memory.stat", "anon 1\nactive_file 2\n")
        let reader = CgroupMemoryReader(
            location: CgroupLocation(version: .v2, mountPoint: "/sys/fs/cgroup", path: "/system.slice/app.service"), files: tree.files)
        let error = #expect(throws: CgroupError.self) { try reader.measuredUsage(leavingOutInactiveFile: true) }
        #expect(error?.code == .malformed && error?.path?.hasSuffix("app.service/memory.stat") == true)
        #expect(try reader.measuredUsage(leavingOutInactiveFile: false).bytes == 312_147_968, "counted, memory.stat is not read")
    }

    @Test func theHeldOpenStatLineIsTheKeyExactlyAndFresh() throws {
        let tree = try ScratchTree(copying: "v1-host")
        let stat = "/sys/fs/cgroup/memory/system.slice/memory.stat"
        let total = try UsageFile(stat, format: .keyed("total_inactive_file"), files: tree.files)
        let own = try UsageFile(stat, format: .keyed("inactive_file"), files: tree.files)
        #expect(try total.read() == 31_457_280)
        #expect(try own.read() == 0, "inactive_file is not the tail of total_inactive_file")
        try UsageFileTests.overwrite(tree.path(stat), "inactive_file 7\ntotal_inactive_file 4096\n")
        #expect(try total.read() == 4096)
    }

    @Test func aStatLineMissingCutOffOrNotANumberIsMalformed() throws {
        let tree = try ScratchTree()
        let stat = "/sys/fs/cgroup/app/memory.stat"
        for content in [
            "anon 1\n", "inactive_file\n", "inactive_file \n", "inactive_file x\n", "inactive_file 12", "inactive_file 1 2\n",
            "inactive_file 99999999999999999999999\n", String(repeating: "a_line_that_fills_the_buffer 1\n", count: 600) + "inactive_file 1\n",
        ] {
            try tree.write(stat, content)
            let file = try UsageFile(stat, format: .keyed("inactive_file"), files: tree.files)
            let error = #expect(throws: CgroupError.self, "\(content.prefix(40).debugDescription)") { try file.read() }
            #expect(error?.code == .malformed && error?.path?.hasSuffix(stat) == true)
        }
    }
}

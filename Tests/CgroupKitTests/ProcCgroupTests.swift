import Testing

@testable import CgroupKit

@Suite("CgroupMembership and /proc/PID/cgroup")
struct ProcCgroupTests {
    let path = "/proc/self/cgroup"

    @Test("A hybrid host's file gives every hierarchy, the unified line last")
    func hybridFileGivesEveryHierarchy() throws {
        let files = Fixture.files("hybrid-host")
        let memberships = try CgroupMembership.parse(files.read(path), path: files.path(path))
        #expect(memberships.count == 13)
        #expect(memberships.filter(\.isUnified) == [CgroupMembership(hierarchyID: 0, controllers: [], path: "/system.slice/app.service")])
        #expect(memberships.first { $0.controllers.contains("memory") }?.hierarchyID == 7)
        #expect(memberships.first { $0.hierarchyID == 10 }?.controllers == ["cpu", "cpuacct"])
        #expect(memberships.first { $0.hierarchyID == 1 }?.controllers == ["name=systemd"])
    }

    @Test("A pure cgroup2 line has no controllers and is the unified line")
    func pureCgroup2LineIsUnified() throws {
        let memberships = try CgroupMembership.parse("0::/\n", path: path)
        #expect(memberships == [CgroupMembership(hierarchyID: 0, controllers: [], path: "/")])
        #expect(memberships[0].isUnified)
    }

    @Test("A v1 memory line is not the unified line")
    func v1LineIsNotUnified() throws {
        let membership = try #require(try CgroupMembership.parse("4:memory:/\n", path: path).first)
        #expect(!membership.isUnified)
    }

    @Test("A path holding colons keeps them")
    func pathWithColonsKeepsThem() throws {
        let text = "0::/system.slice/docker-ab12.scope:cri-containerd:sandbox\n"
        let memberships = try CgroupMembership.parse(text, path: path)
        #expect(memberships.first?.path == "/system.slice/docker-ab12.scope:cri-containerd:sandbox")
        #expect(memberships.first?.controllers == [])
    }

    @Test("A path outside the namespace keeps its leading /..")
    func pathOutsideNamespaceIsKept() throws {
        #expect(try CgroupMembership.parse("0::/../../x\n", path: path).first?.path == "/../../x")
    }

    @Test(
        "A malformed line is malformed and names the file",
        arguments: [
            "0:/\n", "x::/\n", "-1::/\n", "4:memory:system.slice\n", "4:memory:\n", "\n",
        ])
    func malformedLineIsMalformed(text: String) {
        expectError(.malformed, naming: path) { () throws(CgroupError) in try CgroupMembership.parse(text, path: path) }
    }
}

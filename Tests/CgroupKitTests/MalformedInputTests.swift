import Foundation
import Testing

@testable import CgroupKit

/// Broken variants of the fixture trees, made at test time: every failure is `.malformed`
/// (or the code the file's absence calls for) and names the file at fault.
@Suite("Malformed kernel files")
struct MalformedInputTests {
    let app = "/sys/fs/cgroup/system.slice/app.service"
    let v1App = "/sys/fs/cgroup/memory/system.slice/app.service"

    func v2Reader(_ tree: ScratchTree, _ path: String = "/system.slice/app.service") -> CgroupMemoryReader {
        CgroupMemoryReader(location: CgroupLocation(version: .v2, mountPoint: "/sys/fs/cgroup", path: path), files: tree.files)
    }

    func v1Reader(_ tree: ScratchTree) -> CgroupMemoryReader {
        CgroupMemoryReader(location: CgroupLocation(version: .v1, mountPoint: "/sys/fs/cgroup/memory", path: "/system.slice/app.service"), files: tree.files)
    }

    @Test("An empty memory.current is malformed and names the file")
    func emptyMemoryCurrent() throws {
        let tree = try ScratchTree(copying: "v2-host")
        try tree.write(app + "/memory.current", "")
        let error = expectError(.malformed, naming: tree.path(app + "/memory.current")) { () throws(CgroupError) in
            try v2Reader(tree).usage()
        }
        #expect(error?.message.contains("empty") == true)
    }

    @Test("A memory.max with garbage is malformed and names the file")
    func garbageMemoryMax() throws {
        let tree = try ScratchTree(copying: "v2-host")
        try tree.write(app + "/memory.max", "max\u{0}\u{0}garbage\n")
        expectError(.malformed, naming: tree.path(app + "/memory.max")) { () throws(CgroupError) in
            try v2Reader(tree).effectiveLimit()
        }
    }

    @Test("Garbage in an ancestor's memory.high names the ancestor's file")
    func garbageInAncestorsMemoryHigh() throws {
        let tree = try ScratchTree(copying: "v2-host")
        try tree.write("/sys/fs/cgroup/system.slice/memory.high", "402653184 bytes\n")
        expectError(.malformed, naming: tree.path("/sys/fs/cgroup/system.slice/memory.high")) { () throws(CgroupError) in
            try v2Reader(tree).effectiveLimit()
        }
    }

    @Test("A v1 memory.limit_in_bytes with garbage is malformed and names the file")
    func garbageLimitInBytes() throws {
        let tree = try ScratchTree(copying: "v1-host")
        try tree.write(v1App + "/memory.limit_in_bytes", "unlimited\n")
        expectError(.malformed, naming: tree.path(v1App + "/memory.limit_in_bytes")) { () throws(CgroupError) in
            try v1Reader(tree).effectiveLimit()
        }
    }

    @Test("A memory.stat line lacking its value is malformed and names the file and line")
    func statLineLackingValue() throws {
        let tree = try ScratchTree(copying: "v2-host")
        try tree.write(app + "/memory.stat", "anon 251658240\nfile 52428800\nkernel\nkernel_stack 163840\n")
        let error = expectError(.malformed, naming: tree.path(app + "/memory.stat")) { () throws(CgroupError) in
            try v2Reader(tree).stat()
        }
        #expect(error?.message.contains("line 3") == true)
    }

    @Test("A v1 memory.stat with a repeated key fails the effective limit and names memory.stat")
    func statWithRepeatedKey() throws {
        let tree = try ScratchTree(copying: "v1-host")
        let stat = try String(contentsOfFile: tree.path(v1App + "/memory.stat"), encoding: .utf8)
        try tree.write(v1App + "/memory.stat", stat + "hierarchical_memory_limit 134217728\n")
        let error = expectError(.malformed, naming: tree.path(v1App + "/memory.stat")) { () throws(CgroupError) in
            try v1Reader(tree).effectiveLimit()
        }
        #expect(error?.message.contains("\"hierarchical_memory_limit\" appears twice") == true)
    }

    @Test("A memory.events cut mid-line is malformed and names the file")
    func truncatedMemoryEvents() throws {
        let tree = try ScratchTree(copying: "v2-host")
        try tree.write(app + "/memory.events", "low 0\nhigh 0\nmax 0\noom 0\noom_k")
        expectError(.malformed, naming: tree.path(app + "/memory.events")) { () throws(CgroupError) in
            try v2Reader(tree).events()
        }
    }

    @Test("A v1 memory.failcnt with garbage is malformed and names the file")
    func garbageFailcnt() throws {
        let tree = try ScratchTree(copying: "v1-host")
        try tree.write(v1App + "/memory.failcnt", "lots\n")
        expectError(.malformed, naming: tree.path(v1App + "/memory.failcnt")) { () throws(CgroupError) in
            try v1Reader(tree).events()
        }
    }

    @Test("A truncated memory.pressure read from a tree is malformed and names the file")
    func truncatedPressureFile() throws {
        let tree = try ScratchTree(copying: "v2-host")
        let file = app + "/memory.pressure"
        try tree.write(file, "some avg10=1.53 avg60=0.87 avg300=0.22 total=5843021\nfull avg10=1.12 avg60=0.6")
        expectError(.malformed, naming: tree.path(file)) { () throws(CgroupError) in
            try PressureStall.parse(tree.files.read(file), path: tree.files.path(file))
        }
    }

    @Test("A file over 1 MiB is malformed and names the file")
    func fileOverOneMebibyte() throws {
        let tree = try ScratchTree()
        try tree.write("/sys/fs/cgroup/memory.stat", Data(repeating: UInt8(ascii: "7"), count: KernelFiles.maximumFileSize + 1))
        let error = expectError(.malformed, naming: tree.path("/sys/fs/cgroup/memory.stat")) { () throws(CgroupError) in
            try tree.files.read("/sys/fs/cgroup/memory.stat")
        }
        #expect(error?.message.contains("larger than 1048576 bytes") == true)
    }

    @Test("A file of exactly 1 MiB is still read")
    func fileOfExactlyOneMebibyte() throws {
        let tree = try ScratchTree()
        try tree.write("/proc/self/mountinfo", Data(repeating: UInt8(ascii: "a"), count: KernelFiles.maximumFileSize))
        #expect(try tree.files.read("/proc/self/mountinfo").utf8.count == KernelFiles.maximumFileSize)
    }

    @Test("A file that is not UTF-8 is malformed and names the file")
    func fileNotUTF8() throws {
        let tree = try ScratchTree()
        try tree.write("/proc/self/cgroup", Data([0x30, 0x3A, 0x3A, 0x2F, 0xFF, 0xFE, 0x0A]))
        expectError(.malformed, naming: tree.path("/proc/self/cgroup")) { () throws(CgroupError) in
            try tree.files.read("/proc/self/cgroup")
        }
    }

    @Test("A /proc/meminfo without MemAvailable is malformed and names the file")
    func meminfoWithoutMemAvailable() throws {
        let path = "/proc/meminfo"
        expectError(.malformed, naming: path) { () throws(CgroupError) in
            try SystemMemory.parse("MemTotal:       16326908 kB\nMemFree:          981232 kB\n", path: path)
        }
        expectError(.malformed, naming: path) { () throws(CgroupError) in
            try SystemMemory.parse("MemTotal:       16326908 kB\nMemAvailable:   lots kB\n", path: path)
        }
    }

    @Test("A /proc/meminfo value that overflows in bytes is malformed")
    func meminfoOverflow() {
        expectError(.malformed, naming: "/proc/meminfo") { () throws(CgroupError) in
            try SystemMemory.parse("MemTotal: 18446744073709551615 kB\nMemAvailable: 1 kB\n", path: "/proc/meminfo")
        }
    }
}

import Foundation
import Testing

@testable import CgroupKit

/// The held-open usage file adaptive sampling reads: parsed in place, read afresh each time, and
/// strict about its format. (Plain files stand in for `memory.current` and `/proc/meminfo`; a
/// real cgroup file, removed under the reader, is tested with the monitor.)
struct UsageFileTests {
    static func file(_ content: String) throws -> (ScratchTree, String) {
        let tree = try ScratchTree()
        try tree.write("/sys/fs/cgroup/app/memory.current", content)
        return (tree, "/sys/fs/cgroup/app/memory.current")
    }

    /// Replaces a file's content in place (the same inode, as the kernel's files keep theirs).
    static func overwrite(_ realPath: String, _ content: String) throws {
        let handle = try #require(FileHandle(forWritingAtPath: realPath))
        defer { try? handle.close() }
        try handle.truncate(atOffset: 0)
        try handle.write(contentsOf: Data(content.utf8))
    }

    @Test func aByteCountIsReadAndEachReadIsFresh() throws {
        let (tree, path) = try Self.file("123456789\n")
        let usage = try UsageFile(path, format: .bytes, files: tree.files)
        #expect(try usage.read() == 123_456_789)
        try Self.overwrite(tree.path(path), "42")
        #expect(try usage.read() == 42, "read from offset 0 again, not from where the last read ended")
    }

    @Test func malformedContentIsAnErrorNamingTheFile() throws {
        for content in ["", "\n", "12a\n", "-1\n", "99999999999999999999999\n", "1 2\n", "max\n"] {
            let (tree, path) = try Self.file(content)
            let usage = try UsageFile(path, format: .bytes, files: tree.files)
            let error = #expect(throws: CgroupError.self, "\(content.debugDescription)") { try usage.read() }
            #expect(error?.code == .malformed && error?.path?.hasSuffix(path) == true)
        }
    }

    @Test func meminfoGivesTotalLessAvailable() throws {
        let tree = try ScratchTree(copying: "v1-host")
        let usage = try UsageFile("/proc/meminfo", format: .meminfo, files: tree.files)
        let expected = try SystemMemory.parse(tree.files.read("/proc/meminfo"), path: "/proc/meminfo").usedBytes
        #expect(try usage.read() == expected)
        try Self.overwrite(tree.path("/proc/meminfo"), "MemTotal:       1000 kB\nMemFree:         100 kB\nMemAvailable:    1500 kB\n")
        #expect(try usage.read() == 0, "more available than total reads as nothing used")
    }

    @Test func meminfoWithoutItsLinesOrWithBadValuesIsMalformed() throws {
        let tree = try ScratchTree()
        for content in [
            "MemTotal: 1000 kB\nMemFree: 10 kB\n", "MemTotal: 1000 kB\nMemAvailable: lots kB\n", "MemTotal: 1000\nMemAvailable: 10 kB\n",
            "MemTotal: 99999999999999999 kB\nMemAvailable: 1 kB\n", String(repeating: "Filler: 1 kB\n", count: 60) + "MemTotal: 1 kB\nMemAvailable: 1 kB\n",
        ] {
            try tree.write("/proc/meminfo", content)
            let usage = try UsageFile("/proc/meminfo", format: .meminfo, files: tree.files)
            let error = #expect(throws: CgroupError.self, "\(content.prefix(40))") { try usage.read() }
            #expect(error?.code == .malformed)
        }
    }

    @Test func aMissingFileCannotBeOpened() throws {
        let tree = try ScratchTree()
        let error = #expect(throws: CgroupError.self) { try UsageFile("/sys/fs/cgroup/gone/memory.current", format: .bytes, files: tree.files) }
        #expect(error?.code == .notFound)
    }

    @Test func aProcessStartTimeIsField22CountedFromTheLastParenthesis() {
        let fields = (3...30).map(String.init)  // field n holds n
        #expect(ProcessAge.startTicks(stat: "12 (a) b (c d) " + fields.joined(separator: " ")) == 22)
        #expect(ProcessAge.startTicks(stat: "12 (short) 3 4") == nil)
        #expect(ProcessAge.startTicks(stat: "no parenthesis") == nil)
        #expect(ProcessAge.now() != nil, "this process's own age is readable")
    }
}

import CgroupKit
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A host's files as plain files in a temporary directory (a `KernelFiles` root), removed with it:
/// the ground of the synthetic hosts. Files a monitor holds open are changed in place.
final class SyntheticFileTree {
    let root: String
    var files: KernelFiles { KernelFiles(root: root) }

    init(prefix: String) {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString)").path
    }

    deinit {
        try? FileManager.default.removeItem(atPath: root)
    }

    /// Creates (or replaces) a file, with its folders.
    func write(_ hostPath: String, _ text: String) throws {
        let url = URL(fileURLWithPath: root + hostPath)
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try Data(text.utf8).write(to: url)
    }

    /// Replaces a file's content in place with one write at offset 0, as the kernel changes its
    /// own files (inotify sees IN_MODIFY). `text` must be as long as what it replaces (no
    /// truncation: a reader between a truncate and the write would see an empty file).
    func overwrite(_ hostPath: String, _ text: String) throws {
        let descriptor = open(root + hostPath, O_WRONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw CocoaError(.fileNoSuchFile) }
        defer { close(descriptor) }
        let bytes = Array(text.utf8)
        guard bytes.withUnsafeBytes({ pwrite(descriptor, $0.baseAddress, $0.count, 0) }) == bytes.count else { throw CocoaError(.fileWriteUnknown) }
    }

    /// A byte count as 20 digits (leading zeros) and a newline: every value the same length, so
    /// one in-place write replaces the last whole and a reader never sees a half-written file.
    static func fixedWidth(_ bytes: UInt64) -> String {
        let digits = String(bytes)
        return String(repeating: "0", count: max(0, 20 - digits.count)) + digits + "\n"
    }

    /// The files every synthetic cgroup v2 host has: the cgroup2 mount, the process's cgroup,
    /// `/proc/meminfo`, the root's controllers.
    func writeV2Host(processCgroup: String) throws {
        try write("/proc/self/mountinfo", "30 1 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate\n")
        try write("/proc/self/cgroup", "0::\(processCgroup)\n")
        try write("/proc/meminfo", "MemTotal:       16000000 kB\nMemFree:         8000000 kB\nMemAvailable:    9000000 kB\n")
        try write("/sys/fs/cgroup/cgroup.controllers", "cpu io memory pids\n")
    }

    /// A cgroup v2 memory cgroup's files: `memory.max`, `memory.high` (none), `memory.events`
    /// (zeros) and `memory.current`.
    func writeMemoryCgroup(_ path: String, limit: UInt64?, usage: UInt64 = 0) throws {
        try write("/sys/fs/cgroup\(path)/memory.max", limit.map { "\($0)\n" } ?? "max\n")
        try write("/sys/fs/cgroup\(path)/memory.high", "max\n")
        try write("/sys/fs/cgroup\(path)/memory.events", "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n")
        try write("/sys/fs/cgroup\(path)/memory.current", Self.fixedWidth(usage))
    }
}

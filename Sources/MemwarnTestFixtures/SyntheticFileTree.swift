package import CgroupKit
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A host's files as plain files in a temporary directory (a `KernelFiles` root), removed with it:
/// the ground of the synthetic hosts. Files a monitor holds open are changed in place.
package final class SyntheticFileTree {
    package let root: String
    package var files: KernelFiles { KernelFiles(root: root) }

    package init(prefix: String) {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString)").path
    }

    deinit {
        try? FileManager.default.removeItem(atPath: root)
    }

    /// Creates (or replaces) a file, with its folders.
    package func write(_ hostPath: String, _ text: String) throws {
        let url = URL(fileURLWithPath: root + hostPath)
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try Data(text.utf8).write(to: url)
    }

    /// Replaces a file's content in place with one write at offset 0, as the kernel changes its
    /// own files (inotify sees IN_MODIFY). `text` must be as long as what it replaces (no
    /// truncation: a reader between a truncate and the write would see an empty file).
    package func overwrite(_ hostPath: String, _ text: String) throws {
        let descriptor = open(root + hostPath, O_WRONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw CocoaError(.fileNoSuchFile) }
        defer { close(descriptor) }
        let bytes = Array(text.utf8)
        guard bytes.withUnsafeBytes({ pwrite(descriptor, $0.baseAddress, $0.count, 0) }) == bytes.count else { throw CocoaError(.fileWriteUnknown) }
    }

    /// A byte count as 20 digits (leading zeros) and a newline: every value the same length, so
    /// one in-place write replaces the last whole and a reader never sees a half-written file.
    package static func fixedWidth(_ bytes: UInt64) -> String {
        let digits = String(bytes)
        return String(repeating: "0", count: max(0, 20 - digits.count)) + digits + "\n"
    }

    /// The files every synthetic cgroup v2 host has: the cgroup2 mount, the process's cgroup,
    /// `/proc/meminfo`, the root's controllers.
    package func writeV2Host(processCgroup: String) throws {
        try write("/proc/self/mountinfo", "30 1 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate\n")
        try write("/proc/self/cgroup", "0::\(processCgroup)\n")
        try write("/proc/meminfo", "MemTotal:       16000000 kB\nMemFree:         8000000 kB\nMemAvailable:    9000000 kB\n")
        try write("/sys/fs/cgroup/cgroup.controllers", "cpu io memory pids\n")
    }

    /// A cgroup v2 memory cgroup's files: `memory.max`, `memory.high` (none), `memory.events`
    /// (zeros) and `memory.current`.
    package func writeMemoryCgroup(_ path: String, limit: UInt64?, usage: UInt64 = 0) throws {
        try write("/sys/fs/cgroup\(path)/memory.max", limit.map { "\($0)\n" } ?? "max\n")
        try write("/sys/fs/cgroup\(path)/memory.high", "max\n")
        try write("/sys/fs/cgroup\(path)/memory.events", "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n")
        try write("/sys/fs/cgroup\(path)/memory.current", Self.fixedWidth(usage))
    }

    /// The files every synthetic cgroup v1 host has: the v1 memory hierarchy's mount, the
    /// process's memory cgroup, `/proc/meminfo`, and the root memory cgroup (no limit). With
    /// `unified`, a hybrid host: a cgroup2 tree at `/sys/fs/cgroup/unified` without the memory
    /// controller, the process in `processCgroup` there too.
    package func writeV1Host(processCgroup: String, unified: Bool = false) throws {
        var mountinfo = "31 26 0:27 / /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime shared:12 - cgroup cgroup rw,memory\n"
        var cgroups = "4:memory:\(processCgroup)\n"
        if unified {
            mountinfo += "27 26 0:26 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:5 - cgroup2 cgroup2 rw,nsdelegate\n"
            cgroups += "0::\(processCgroup)\n"
            try write("/sys/fs/cgroup/unified/cgroup.controllers", "cpu io pids\n")
        }
        try write("/proc/self/mountinfo", mountinfo)
        try write("/proc/self/cgroup", cgroups)
        try write("/proc/meminfo", "MemTotal:       16000000 kB\nMemFree:         8000000 kB\nMemAvailable:    9000000 kB\n")
        try writeV1MemoryCgroup("", limit: nil, usage: 0)
    }

    /// A cgroup v1 memory cgroup's files: `memory.limit_in_bytes`, `memory.usage_in_bytes`,
    /// `memory.stat`, `memory.use_hierarchy` (1), `memory.oom_control`, `memory.pressure_level`,
    /// and a `cgroup.event_control` no ordinary user may write (mode 0444), as a real host's is
    /// root's: the monitor is refused and samples usage. (Root may write any plain file, so there
    /// the monitor would register notifications no plain file ever sends.)
    package func writeV1MemoryCgroup(_ path: String, limit: UInt64?, usage: UInt64 = 0) throws {
        let directory = "/sys/fs/cgroup/memory\(path)"
        try write("\(directory)/memory.limit_in_bytes", "\(limit ?? 9_223_372_036_854_771_712)\n")
        try write("\(directory)/memory.usage_in_bytes", Self.fixedWidth(usage))
        try write("\(directory)/memory.stat", "cache 0\nrss 0\ninactive_file 0\nactive_file 0\ntotal_inactive_file 0\n")
        try write("\(directory)/memory.use_hierarchy", "1\n")
        try write("\(directory)/memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n")
        try write("\(directory)/memory.pressure_level", "")
        try write("\(directory)/cgroup.event_control", "")
        try FileManager.default.setAttributes([.posixPermissions: 0o444], ofItemAtPath: root + "\(directory)/cgroup.event_control")
    }
}

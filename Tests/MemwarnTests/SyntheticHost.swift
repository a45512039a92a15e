import CgroupKit
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import MemwarnSystem

/// A cgroup v2 host made of plain files in a temporary directory (a `KernelFiles` root): one
/// cgroup `/app` with `memory.max`, whose `memory.current` a test writes in place, as the kernel
/// changes its own files. Monitors read it through `MonitorConfiguration.files`, with no kernel
/// and no root: the engine's sampling, evaluation and scheduling are the real ones. (PSI files
/// are left out: a trigger needs the kernel.)
final class SyntheticHost {
    let root: String
    let limit: UInt64
    var files: KernelFiles { KernelFiles(root: root) }
    let cgroup = CgroupLocation(version: .v2, mountPoint: "/sys/fs/cgroup", path: "/app")

    init(limit: UInt64, usage: UInt64 = 0) throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("memwarn-synthetic-\(UUID().uuidString)").path
        self.limit = limit
        try write("/proc/self/mountinfo", "30 1 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate\n")
        try write("/proc/self/cgroup", "0::/app\n")
        try write("/proc/meminfo", "MemTotal:       16000000 kB\nMemFree:         8000000 kB\nMemAvailable:    9000000 kB\n")
        try write("/sys/fs/cgroup/cgroup.controllers", "cpu io memory pids\n")
        try write("/sys/fs/cgroup/app/memory.max", "\(limit)\n")
        try write("/sys/fs/cgroup/app/memory.high", "max\n")
        try write("/sys/fs/cgroup/app/memory.events", "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n")
        try write("/sys/fs/cgroup/app/memory.current", Self.fixedWidth(usage))
    }

    deinit {
        try? FileManager.default.removeItem(atPath: root)
    }

    /// Sets usage to a share of the limit, in place (the same inode the monitor holds open).
    func setUsage(_ fraction: Double) throws {
        try overwrite("/sys/fs/cgroup/app/memory.current", Self.fixedWidth(UInt64(Double(limit) * fraction)))
    }

    /// A byte count as 20 digits (leading zeros) and a newline: every value the same length, so
    /// one in-place write replaces the last whole and a reader never sees a half-written file.
    static func fixedWidth(_ bytes: UInt64) -> String {
        let digits = String(bytes)
        return String(repeating: "0", count: max(0, 20 - digits.count)) + digits + "\n"
    }

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
}

import CgroupKit

/// Memory pressure stall (PSI) over a soak's loaded run: the time some task, and every task,
/// waited for memory. The run's cgroup's own `memory.pressure` where it has one (cgroup v2); on
/// cgroup v1 the whole system's `/proc/pressure/memory`, which other work on the host adds to.
package struct MemoryStall: Sendable, Hashable, Codable {
    /// `cgroup` (the run's own) or `system`.
    package var source: String
    /// Seconds some task was stalled on memory.
    package var someSeconds: Double
    /// Seconds every task was (`nil` where the file has no `full` line).
    package var fullSeconds: Double?

    /// A reading of the totals, to subtract from a later one.
    struct Reading {
        var source: String
        var stall: PressureStall
    }

    /// The totals now, from the cgroup's file or else the system's; `nil` without PSI.
    static func read(cgroupDirectory: String) -> Reading? {
        for (path, source) in [(cgroupDirectory + "/memory.pressure", "cgroup"), ("/proc/pressure/memory", "system")] {
            guard let text = try? KernelFiles.host.read(path), let stall = try? PressureStall.parse(text, path: path) else { continue }
            return Reading(source: source, stall: stall)
        }
        return nil
    }

    /// What stalled between two readings of the same file.
    init?(from start: Reading?, to end: Reading?) {
        guard let start, let end, start.source == end.source, end.stall.some.total >= start.stall.some.total else { return nil }
        source = start.source
        someSeconds = Double(end.stall.some.total - start.stall.some.total) / 1e6
        if let last = end.stall.full, let first = start.stall.full, last.total >= first.total {
            fullSeconds = Double(last.total - first.total) / 1e6
        }
    }

    /// `some 1.20 s, full 0.30 s`.
    package var seconds: String {
        "some \(String(format: "%.2f", someSeconds)) s" + (fullSeconds.map { ", full \(String(format: "%.2f", $0)) s" } ?? "")
    }

    /// `some 1.20 s, full 0.30 s (the run's cgroup)`.
    package var summary: String {
        seconds + (source == "cgroup" ? " (the run's cgroup)" : " (system-wide: v1 has no PSI of its own per cgroup)")
    }
}

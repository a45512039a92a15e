import CgroupKit
import MemwarnMonitor

/// `memwarn status --all`: every memory cgroup at and below one, one ``StatusReport`` each
/// (the `systemd-cgtop` view), sorted by path.
struct StatusTree {
    /// The rows, sorted by path.
    var reports: [StatusReport]
    /// The cgroups that exist but could not be read (the rest are still reported).
    var failures: [CgroupError]

    /// Walks the memory hierarchy from `root` and reads each cgroup as `memwarn status --cgroup
    /// <directory> --growth-sample 0s` would. Left out, without an error: cgroups that vanish
    /// while it walks, and cgroups without memory files (the cgroup2 root, and cgroup2 groups
    /// whose parent does not enable the memory controller).
    init(root: CgroupLocation, policy: PressurePolicy, discovery: CgroupDiscovery = CgroupDiscovery()) {
        let files = discovery.files
        var reports: [StatusReport] = []
        var failures: [CgroupError] = []
        for location in Self.cgroups(below: root, files: files).sorted(by: { $0.path < $1.path }) {
            do throws(CgroupError) {
                let layout = try discovery.layout(cgroupPath: location.directory)
                let snapshot = try SnapshotSampler(layout: layout, files: files, policy: policy).sample()
                reports.append(
                    StatusReport(layout: layout, snapshot: snapshot, level: PressureMonitor.level(of: snapshot, policy: policy), forecast: nil, policy: policy))
            } catch  where error.code == .notFound || error.code == .noMemoryController || !files.isDirectory(location.directory) {
                continue  // gone meanwhile, or not a memory cgroup
            } catch {
                failures.append(error)
            }
        }
        self.reports = reports
        self.failures = failures
    }

    /// `root` and every cgroup directory below it. A directory that vanishes while it is
    /// listed is left out with its subtree.
    static func cgroups(below root: CgroupLocation, files: KernelFiles) -> [CgroupLocation] {
        var found: [CgroupLocation] = []
        var pending = [root]
        while let next = pending.popLast() {
            found.append(next)
            for name in (try? files.list(next.directory)) ?? [] {
                let child = next.child(name)
                if files.isDirectory(child.directory) { pending.append(child) }
            }
        }
        return found
    }

    /// The table: path, the cgroup's own usage, its effective limit, the ratio and the level.
    func text() -> String {
        var rows = [["path", "usage", "limit", "ratio", "level"]]
        var measuresSystem = false
        for report in reports {
            let system = report.measure == "system"
            measuresSystem = measuresSystem || system
            rows.append([
                report.cgroupPath.map(Output.name) ?? "?",
                report.cgroupUsageBytes.map(StatusReport.bytes) ?? "?",
                report.limitBytes.map(StatusReport.bytes) ?? "none",
                String(format: "%.1f%%", report.ratio * 100) + (system ? "*" : ""),
                report.level,
            ])
        }
        let widths = (0..<5).map { column in rows.map { $0[column].count }.max() ?? 0 }
        var lines = rows.map { row in
            // The path and the level left-aligned, the figures right-aligned.
            row.enumerated().map { column, cell in
                let padding = String(repeating: " ", count: widths[column] - cell.count)
                switch column {
                case 0: return cell + padding
                case 4: return cell
                default: return padding + cell
                }
            }.joined(separator: "  ")
        }
        if measuresSystem {
            lines.append("* no limit applies: ratio and level are the system's (MemTotal - MemAvailable), as memwarn status measures them")
        }
        return lines.joined(separator: "\n")
    }
}

/// How a host mounts cgroups.
package enum CgroupMode: String, Sendable, Codable {
    /// Only cgroup v1 hierarchies.
    case v1
    /// Only the cgroup2 unified hierarchy.
    case v2
    /// cgroup v1 controllers plus a cgroup2 hierarchy (systemd's "hybrid" layout).
    case hybrid
}

/// What memwarn found about a process's cgroups.
package struct CgroupLayout: Sendable, Hashable {
    /// The host's cgroup mode.
    package var mode: CgroupMode
    /// The cgroup whose memory controller accounts the process (v1 `memory` hierarchy, or
    /// the cgroup2 group when the memory controller is on cgroup2); `nil` when no memory
    /// controller is mounted.
    package var memory: CgroupLocation?
    /// The process's cgroup2 group, where `memory.pressure`, `cgroup.freeze` and
    /// `cgroup.kill` live; `nil` when no cgroup2 hierarchy is mounted.
    package var unified: CgroupLocation?
    /// Things discovery had to decide that an operator should know (for example that
    /// libcgroup could not resolve the path and `/proc/PID/cgroup` was used).
    package var notes: [String]

    /// Creates a layout.
    ///
    /// - Parameters:
    ///   - mode: the host's cgroup mode.
    ///   - memory: the cgroup whose memory controller accounts the process, or `nil`.
    ///   - unified: the process's cgroup2 group, or `nil`.
    ///   - notes: what discovery decided that an operator should know.
    package init(mode: CgroupMode, memory: CgroupLocation?, unified: CgroupLocation?, notes: [String] = []) {
        self.mode = mode
        self.memory = memory
        self.unified = unified
        self.notes = notes
    }
}

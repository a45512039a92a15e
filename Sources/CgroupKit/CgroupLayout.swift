/// How a host mounts cgroups.
package enum CgroupMode: String, Sendable, Codable {
    /// Only cgroup v1 hierarchies.
    case v1
    /// Only the cgroup2 unified hierarchy.
    case v2
    /// cgroup v1 controllers plus a cgroup2 hierarchy (systemd's "hybrid" layout).
    case hybrid
}

/// A cgroup filesystem version.
public enum CgroupVersion: String, Sendable, Codable {
    /// A cgroup v1 hierarchy.
    case v1
    /// The cgroup2 unified hierarchy.
    case v2
}

/// Where one cgroup lives: its hierarchy's mount and its path inside the mount.
public struct CgroupLocation: Sendable, Hashable {
    /// The hierarchy's version.
    public var version: CgroupVersion
    /// The host path the hierarchy is mounted at, such as `/sys/fs/cgroup/memory`.
    public var mountPoint: String
    /// The cgroup's path inside the mount: `/` for the mount's root, else `/a/b`.
    public var path: String

    /// Creates a location.
    ///
    /// - Parameters:
    ///   - version: the hierarchy's version.
    ///   - mountPoint: the host path the hierarchy is mounted at.
    ///   - path: the cgroup's path inside the mount, `/` for its root.
    public init(version: CgroupVersion, mountPoint: String, path: String) {
        self.version = version
        self.mountPoint = mountPoint
        self.path = path
    }

    /// The cgroup's directory (a host path).
    public var directory: String { path == "/" ? mountPoint : mountPoint + path }

    /// The host path of one of the cgroup's files.
    ///
    /// - Parameter name: the file's name, such as `memory.current`.
    /// - Returns: the file's host path.
    package func file(_ name: String) -> String { directory + "/" + name }

    /// The parent cgroup inside the same mount, or `nil` at the mount's root.
    package var parent: CgroupLocation? {
        guard path != "/" else { return nil }
        let trimmed = path[..<(path.lastIndex(of: "/") ?? path.startIndex)]
        return CgroupLocation(version: version, mountPoint: mountPoint, path: trimmed.isEmpty ? "/" : String(trimmed))
    }

    /// A child cgroup's location.
    ///
    /// - Parameter name: the child's directory name.
    /// - Returns: the child's location in the same mount.
    package func child(_ name: String) -> CgroupLocation {
        CgroupLocation(version: version, mountPoint: mountPoint, path: path == "/" ? "/" + name : path + "/" + name)
    }
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

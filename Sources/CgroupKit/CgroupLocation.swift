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

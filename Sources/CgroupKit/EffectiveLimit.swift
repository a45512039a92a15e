/// The lowest memory limit that applies to a cgroup, and where it comes from.
public struct EffectiveLimit: Sendable, Hashable, Codable {
    /// The limit in bytes.
    public var bytes: UInt64
    /// The file that sets it: `memory.max`, `memory.high`, `memory.limit_in_bytes` or
    /// `hierarchical_memory_limit` (v1: an ancestor's limit, named by the kernel).
    public var file: String
    /// The cgroup that sets it (its path inside the mount). For v1's
    /// `hierarchical_memory_limit` this is the cgroup read: the kernel does not say which
    /// ancestor set the limit.
    public var cgroupPath: String

    /// Creates a limit.
    ///
    /// - Parameters:
    ///   - bytes: the limit in bytes.
    ///   - file: the file that sets it.
    ///   - cgroupPath: the cgroup that sets it, inside the mount.
    package init(bytes: UInt64, file: String, cgroupPath: String) {
        self.bytes = bytes
        self.file = file
        self.cgroupPath = cgroupPath
    }
}

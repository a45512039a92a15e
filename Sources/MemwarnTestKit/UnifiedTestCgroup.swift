public import CgroupKit

#if canImport(Glibc)
import Glibc
#endif

/// A uniquely named child of the cgroup2 root (`/sys/fs/cgroup/unified` on hybrid hosts),
/// for PSI triggers, `cgroup.events`, freeze and kill. Made with `mkdir` (libcgroup 2.0.2
/// would write every ancestor's `cgroup.subtree_control`), removed with `rmdir`.
public final class UnifiedTestCgroup: Sendable {
    /// The cgroup's location.
    public let location: CgroupLocation

    /// Creates the cgroup.
    public init(prefix: String = "memwarn-test") throws {
        let discovery = CgroupDiscovery()
        guard let mount = try discovery.mounts().first(where: { $0.fileSystemType == "cgroup2" }) else {
            throw CgroupError(.unsupported, "no cgroup2 hierarchy is mounted")
        }
        let location = CgroupLocation(version: .v2, mountPoint: mount.mountPoint, path: "/").child("\(prefix)-\(getpid())-\(TestNames.next())")
        guard mkdir(location.directory, 0o755) == 0 else {
            throw KernelFiles.openError(errno, location.directory, writing: true)
        }
        self.location = location
    }

    /// Removes the cgroup (it must hold no process).
    public func remove() throws {
        guard rmdir(location.directory) == 0 || errno == ENOENT else {
            throw KernelFiles.openError(errno, location.directory, writing: true)
        }
    }
}

/// Runs `body` with a new cgroup2 test group and always removes it afterwards.
public func withUnifiedTestCgroup<T>(_ body: (UnifiedTestCgroup) async throws -> T) async throws -> T {
    let cgroup = try UnifiedTestCgroup()
    let result: Result<T, any Error>
    do {
        result = .success(try await body(cgroup))
    } catch {
        result = .failure(error)
    }
    try cgroup.remove()
    return try result.get()
}

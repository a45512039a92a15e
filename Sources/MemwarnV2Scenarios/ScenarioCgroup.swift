import CgroupKit
#if canImport(Glibc)
import Glibc
#endif

/// A cgroup the runner made below the VM's cgroup2 root: made with `mkdir`, configured by
/// writing its files, and removed with all of its descendants after `cgroup.kill` ended
/// whatever still ran in it.
final class ScenarioCgroup: Sendable {
    /// The cgroup2 mount's root (the init script mounts cgroup2 alone at `/sys/fs/cgroup`).
    static let root = CgroupLocation(version: .v2, mountPoint: "/sys/fs/cgroup", path: "/")

    /// Where it is.
    let location: CgroupLocation

    /// Makes the cgroup at `location` and writes `settings` (file, value) in order.
    ///
    /// - Throws: ``CgroupError`` from `mkdir` or a write; nothing is left behind then.
    init(_ location: CgroupLocation, settings: [(file: String, value: String)] = []) throws(CgroupError) {
        guard mkdir(location.directory, 0o755) == 0 else { throw KernelFiles.openError(errno, location.directory, writing: true) }
        self.location = location
        do {
            for setting in settings { try set(setting.file, to: setting.value) }
        } catch {
            rmdir(location.directory)
            throw error
        }
    }

    /// Makes a child with the memory controller enabled for it (`+memory` in this cgroup's
    /// `cgroup.subtree_control` first).
    func child(_ name: String, settings: [(file: String, value: String)] = []) throws(CgroupError) -> ScenarioCgroup {
        try set("cgroup.subtree_control", to: "+memory")
        return try ScenarioCgroup(location.child(name), settings: settings)
    }

    /// Writes one of its files, such as `memory.max`.
    func set(_ file: String, to value: String) throws(CgroupError) {
        try KernelFiles.host.write(value, to: location.file(file))
    }

    /// Reads one of its files as the kernel wrote it.
    func read(_ file: String) throws(CgroupError) -> String {
        try KernelFiles.host.read(location.file(file))
    }

    /// CgroupKit's reader for its memory files.
    var reader: CgroupMemoryReader { CgroupMemoryReader(location: location) }

    /// Whether its directory still exists.
    var exists: Bool { KernelFiles.host.exists(location.directory) }

    /// Kills every process in it and below, then removes it and its descendants, deepest
    /// first, retrying for a while as the kernel frees the killed processes' cgroups.
    func remove() {
        if exists { _ = try? set("cgroup.kill", to: "1") }
        Self.removeTree(location)
    }

    private static func removeTree(_ location: CgroupLocation) {
        for name in (try? KernelFiles.host.list(location.directory)) ?? [] where KernelFiles.host.exists(location.child(name).file("cgroup.procs")) {
            removeTree(location.child(name))
        }
        for _ in 0..<250 {
            if rmdir(location.directory) == 0 || errno == ENOENT { return }
            usleep(20_000)
        }
    }
}

import CgroupKit

#if canImport(Glibc)
import Glibc
#endif

/// What this host lets the harness do: the reason a test needing real cgroups cannot run here,
/// or `nil` when it can. Test suites turn these into skips with the reason (``MemwarnTestTraits``).
public enum TestHost {
    /// Why test cgroups cannot be made here, or `nil` when they can: this process must be root
    /// (it creates cgroups, moves processes, runs children as other users) and its own memory
    /// cgroup must be on cgroup v1, where the suites make their test cgroups (cgroup v2 memory is
    /// tested in the VM stage, `Scripts/v2-vm-test`).
    public static let realCgroupsUnavailable: String? = {
        guard geteuid() == 0 else { return "needs root: it creates cgroups and runs children as other users (run the tests as root)" }
        guard let layout = try? CgroupDiscovery().layout() else { return "needs a readable /proc/self/cgroup and mountinfo" }
        guard let memory = layout.memory, memory.version == .v1 else {
            return
                "needs this process's memory cgroup on cgroup v1 (this host: \(layout.mode.rawValue)); cgroup v2 memory is tested in the VM (Scripts/v2-vm-test)"
        }
        return nil
    }()

    /// Why this process's memory cgroup is limited here (its own limit or an ancestor's), or
    /// `nil` when no limit applies: for tests of what `memwarn status` says without a limit.
    public static let ownCgroupLimited: String? = {
        guard let memory = try? CgroupDiscovery().layout().memory else { return "no memory cgroup found for this process" }
        let limit: EffectiveLimit?
        do { limit = try CgroupMemoryReader(location: memory).effectiveLimit() } catch { return "its limit cannot be read: \(error)" }
        guard let limit else { return nil }
        return "this process's memory cgroup is limited (\(limit.bytes) bytes, \(limit.file) of \(limit.cgroupPath)): a test of no limit needs one without"
    }()

    /// Why groups cannot be made in the cgroup2 hierarchy here (for PSI triggers,
    /// `cgroup.events`, freeze and kill), or `nil` when they can.
    public static let unifiedCgroupsUnavailable: String? = {
        guard geteuid() == 0 else { return "needs root: it creates cgroup2 groups (run the tests as root)" }
        guard let mounts = try? CgroupDiscovery().mounts(), mounts.contains(where: { $0.fileSystemType == "cgroup2" }) else {
            return "needs a cgroup2 hierarchy mounted"
        }
        return nil
    }()
}

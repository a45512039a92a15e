import MemwarnTestKit
public import Testing

extension Tag {
    /// The suite needs root: it makes cgroups, moves processes, or runs children as other users.
    @Tag public static var root: Self
    /// The suite makes cgroup v1 memory cgroups below this process's own.
    @Tag public static var cgroupV1: Self
    /// The suite makes groups in the cgroup2 hierarchy (PSI, `cgroup.events`).
    @Tag public static var cgroupV2: Self
}

extension Trait where Self == ConditionTrait {
    /// Runs only where test cgroups can be made (root, this process's memory cgroup on cgroup
    /// v1); elsewhere the suite is skipped with the reason (``TestHost/realCgroupsUnavailable``).
    public static var needsRealCgroups: Self {
        .enabled(if: TestHost.realCgroupsUnavailable == nil, Comment(rawValue: "skipped: \(TestHost.realCgroupsUnavailable ?? "")"))
    }

    /// Runs only where cgroup2 groups can be made; elsewhere skipped with the reason
    /// (``TestHost/unifiedCgroupsUnavailable``).
    public static var needsUnifiedCgroups: Self {
        .enabled(if: TestHost.unifiedCgroupsUnavailable == nil, Comment(rawValue: "skipped: \(TestHost.unifiedCgroupsUnavailable ?? "")"))
    }

    /// Runs only where no memory limit applies to this process's cgroup; elsewhere skipped with
    /// the reason (``TestHost/ownCgroupLimited``).
    public static var needsUnlimitedOwnCgroup: Self {
        .enabled(if: TestHost.ownCgroupLimited == nil, Comment(rawValue: "skipped: \(TestHost.ownCgroupLimited ?? "")"))
    }
}

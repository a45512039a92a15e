/// Which ancestors of a memory cgroup set a limit, as a walk up the mount found them
/// (`limitedAncestors()`). It changes only when an ancestor's limit is set
/// or removed, so a frequent reader keeps it a while and reads only the limits and usage it names
/// (`constraints(along:)`).
package struct LimitedAncestors: Sendable, Hashable {
    /// The ancestors with a limit of their own, nearest first (on cgroup v1 only those that
    /// account the cgroup's usage: `memory.use_hierarchy`).
    package var cgroups: [CgroupLocation]
    /// cgroup v1: a limit set above the cgroup namespace (`memory.stat`'s
    /// `hierarchical_memory_limit`, lower than every limit visible in the mount), or `nil`.
    package var hiddenLimitBytes: UInt64?

    /// Creates a set of limited ancestors.
    ///
    /// - Parameters:
    ///   - cgroups: the ancestors with a limit, nearest first.
    ///   - hiddenLimitBytes: a limit set above the cgroup namespace (v1), or `nil`.
    package init(cgroups: [CgroupLocation], hiddenLimitBytes: UInt64?) {
        self.cgroups = cgroups
        self.hiddenLimitBytes = hiddenLimitBytes
    }
}

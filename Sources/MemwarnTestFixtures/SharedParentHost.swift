package import CgroupKit

/// A cgroup v2 host made of plain files (``SyntheticFileTree``), shaped as a pod or a systemd
/// slice: a parent `/pod` with `memory.max`, and the watched cgroup `/pod/app` below it with a
/// limit of its own or none. The test writes each cgroup's `memory.current` in place (a parent's
/// counts its other children: a sibling that grows is a parent whose usage grows). Captured
/// shape, not a kernel: cgroup v2 memory files cannot be made on these machines.
package final class SharedParentHost {
    private let tree = SyntheticFileTree(prefix: "memwarn-parent")
    package var files: KernelFiles { tree.files }
    package let cgroup = CgroupLocation(version: .v2, mountPoint: "/sys/fs/cgroup", path: "/pod/app")

    /// - Parameter mountRootLimit: a `memory.max` at the mount's root: a cgroup namespace's root
    ///   (a container's cgroup) has one, a host's root has none.
    package init(parentLimit: UInt64, ownLimit: UInt64? = nil, mountRootLimit: UInt64? = nil) throws {
        try tree.writeV2Host(processCgroup: "/pod/app")
        if let mountRootLimit {
            try tree.write("/sys/fs/cgroup/memory.max", "\(mountRootLimit)\n")
            try tree.write("/sys/fs/cgroup/memory.current", SyntheticFileTree.fixedWidth(0))
        }
        try tree.writeMemoryCgroup("/pod", limit: parentLimit)
        try tree.writeMemoryCgroup("/pod/app", limit: ownLimit)
    }

    /// Says that process `pid` lives in the watched cgroup, as `/proc/PID/cgroup` does (a node
    /// agent reads it for the process that listens on a control socket).
    package func placeProcess(_ pid: Int32) throws {
        try tree.write("/proc/\(pid)/cgroup", "0::\(cgroup.path)\n")
    }

    /// Sets the parent's usage (the app's and its siblings') and the app's own, in place.
    package func setUsage(parent: UInt64, app: UInt64) throws {
        try tree.overwrite("/sys/fs/cgroup/pod/memory.current", SyntheticFileTree.fixedWidth(parent))
        try tree.overwrite("/sys/fs/cgroup/pod/app/memory.current", SyntheticFileTree.fixedWidth(app))
    }

    /// Sets the inactive page cache of the parent and of the app (`memory.stat`'s
    /// `inactive_file`), read by a policy that leaves it out of usage.
    package func setInactivePageCache(parent: UInt64, app: UInt64) throws {
        try tree.write("/sys/fs/cgroup/pod/memory.stat", "anon 0\nfile \(parent)\ninactive_file \(parent)\n")
        try tree.write("/sys/fs/cgroup/pod/app/memory.stat", "anon 0\nfile \(app)\ninactive_file \(app)\n")
    }
}

package import CgroupKit
import Foundation
import MemwarnSystem

/// A cgroup v2 host made of plain files in a temporary directory (a `KernelFiles` root): one
/// cgroup `/app` (or, as a container sees its own cgroup through a cgroup namespace, the root
/// `/`) with `memory.max`, whose `memory.current` a test writes in place, as the kernel
/// changes its own files. Monitors read it through `MonitorConfiguration.files`, with no kernel
/// and no root: the engine's sampling, evaluation and scheduling are the real ones. (PSI files
/// are left out: a trigger needs the kernel.)
package final class SyntheticHost {
    private let tree = SyntheticFileTree(prefix: "memwarn-synthetic")
    package let limit: UInt64
    package var root: String { tree.root }
    package var files: KernelFiles { tree.files }
    package let cgroup: CgroupLocation

    /// A host with the process in `processCgroup`: `/app`, or `/` for a container's view.
    package init(limit: UInt64, usage: UInt64 = 0, processCgroup: String = "/app") throws {
        self.limit = limit
        cgroup = CgroupLocation(version: .v2, mountPoint: "/sys/fs/cgroup", path: processCgroup)
        try tree.writeV2Host(processCgroup: processCgroup)
        try tree.writeMemoryCgroup(processCgroup == "/" ? "" : processCgroup, limit: limit, usage: usage)
    }

    /// Sets usage to a share of the limit, in place (the same inode the monitor holds open).
    package func setUsage(_ fraction: Double) throws {
        try overwrite(cgroup.file("memory.current"), Self.fixedWidth(UInt64(Double(limit) * fraction)))
    }

    /// A byte count as 20 digits and a newline (``SyntheticFileTree/fixedWidth(_:)``).
    package static func fixedWidth(_ bytes: UInt64) -> String { SyntheticFileTree.fixedWidth(bytes) }

    package func write(_ hostPath: String, _ text: String) throws { try tree.write(hostPath, text) }

    /// Replaces a file's content in place (``SyntheticFileTree/overwrite(_:_:)``).
    package func overwrite(_ hostPath: String, _ text: String) throws { try tree.overwrite(hostPath, text) }
}

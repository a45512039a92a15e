import MemwarnSystem

#if canImport(Glibc)
import Glibc
#endif

/// Giving a cgroup v2 cgroup's children the memory controller, so a child can have
/// `memory.max`: `+memory` in the parent's `cgroup.subtree_control`.
///
/// cgroup v2's no-internal-processes rule forbids that while the parent (any cgroup but the
/// hierarchy's real root) holds processes: the kernel answers `EBUSY`. That is the usual case
/// for `memwarn run` as a container's entrypoint (the container's cgroup, the root of its
/// cgroup namespace, holds `memwarn run`) and as a systemd unit's `ExecStart=` with
/// `Delegate=yes`. When the only process there is this one, it moves itself into a leaf of its
/// own first (`leafName`), which leaves the parent free to delegate; with other processes there,
/// the error says so and what to do. cgroup v1 has no such rule: nothing is done there.
package enum ChildMemoryControl {
    /// Makes sure `parent`'s children can have memory limits.
    ///
    /// - Parameters:
    ///   - parent: the cgroup whose children will get `memory.max`.
    ///   - leafName: the child to move this process into when it is alone in `parent`; made
    ///     exclusively. It holds this process until it exits (a cgroup cannot be removed while
    ///     it holds one); name it so that whoever cleans up after a dead run recognises it.
    ///   - beforeMoving: called with the leaf once it is made and before this process moves into
    ///     it (a run takes its lock there, so that the leaf is never seen unclaimed with this
    ///     process in it); an error it throws removes the leaf and is rethrown.
    /// - Returns: the leaf this process moved into, or `nil` when it did not move.
    /// - Throws: `CgroupError`: `.unsupported` when other processes share `parent` (the
    ///   message says why and how to arrange it), or what the kernel said.
    @discardableResult
    package static func enable(
        below parent: CgroupLocation, leafName: String,
        beforeMoving: (CgroupLocation) throws(CgroupError) -> Void = { _ in }
    ) throws(CgroupError) -> CgroupLocation? {
        guard parent.version == .v2 else { return nil }
        let control = parent.file("cgroup.subtree_control")
        if try controllers(control).contains("memory") { return nil }
        do throws(CgroupError) {
            try KernelFiles.host.write("+memory", to: control)
            return nil
        } catch  where error.errno == EBUSY {
            let processes = try KernelFiles.host.read(parent.file("cgroup.procs")).split(separator: "\n").compactMap { Int32($0) }
            guard processes == [getpid()] else {
                throw CgroupError(
                    .unsupported,
                    """
                    cannot give the children of \(parent.directory) the memory controller: it holds other processes \
                    (\(processes.filter { $0 != getpid() }.prefix(5).map(String.init).joined(separator: ", "))), and cgroup v2 lets a cgroup \
                    with processes delegate no controller. Start memwarn run where it is the only process in its cgroup \
                    (a container's entrypoint, a systemd unit's ExecStart= with Delegate=yes, or \
                    systemd-run --scope -p Delegate=yes memwarn run ...)
                    """, path: control, errno: EBUSY)
            }
            let leaf = parent.child(leafName)
            do {
                try FileSystem.makeDirectory(leaf.directory, mode: 0o755)
            } catch {
                throw KernelFiles.openError(error.errno, leaf.directory, writing: true)
            }
            do throws(CgroupError) {
                try beforeMoving(leaf)
                try KernelFiles.host.write(String(getpid()), to: leaf.file("cgroup.procs"))
            } catch {
                try? FileSystem.removeDirectory(leaf.directory)
                throw error
            }
            do throws(CgroupError) {
                try KernelFiles.host.write("+memory", to: control)
            } catch {
                try? KernelFiles.host.write(String(getpid()), to: parent.file("cgroup.procs"))  // back where it was
                try? FileSystem.removeDirectory(leaf.directory)
                throw error
            }
            return leaf
        }
    }

    /// The controllers a `cgroup.subtree_control` file lists.
    private static func controllers(_ file: String) throws(CgroupError) -> [Substring] {
        try KernelFiles.host.read(file).split(whereSeparator: { $0 == " " || $0 == "\n" })
    }
}

#if canImport(Glibc)
import Glibc
#endif

/// Finds a process's cgroups from `/proc/PID/cgroup` and `/proc/self/mountinfo`, on cgroup
/// v1, v2 and hybrid hosts, inside cgroup namespaces too.
///
/// The cgroups come from memwarn's own parse of `/proc/PID/cgroup`, the kernel's answer read
/// whole. On the real host libcgroup's lookup of the v1 memory cgroup
/// (`cgroup_get_current_controller_path`) is asked beside it, and where the two differ the
/// layout's notes say so (libcgroup 2.0.2 stops at a space in the path, and cannot name cgroup2
/// paths at all).
package struct CgroupDiscovery: Sendable {
    /// Where the kernel files are read.
    package var files: KernelFiles

    /// Discovery on this host.
    package init() {
        self.init(files: .host)
    }

    /// Discovery on the given files (a directory of captured files in tests).
    package init(files: KernelFiles) {
        self.files = files
    }

    /// The cgroup mounts visible to this process.
    ///
    /// - Returns: the `cgroup` and `cgroup2` entries of `/proc/self/mountinfo`, in its order.
    /// - Throws: `CgroupError` when `mountinfo` cannot be read or is malformed.
    package func mounts() throws(CgroupError) -> [MountEntry] {
        let path = "/proc/self/mountinfo"
        return try MountEntry.parse(files.read(path), path: files.path(path))
            .filter { $0.fileSystemType == "cgroup" || $0.fileSystemType == "cgroup2" }
    }

    /// The host's cgroup mode.
    ///
    /// - Parameter mounts: the cgroup mounts, as `mounts()` returns them.
    /// - Returns: `.v1`, `.v2` or `.hybrid` (both mounted).
    /// - Throws: `CgroupError` `.unsupported` when no cgroup filesystem is mounted.
    package func mode(mounts: [MountEntry]) throws(CgroupError) -> CgroupMode {
        let hasV1 = mounts.contains { $0.fileSystemType == "cgroup" }
        let hasV2 = mounts.contains { $0.fileSystemType == "cgroup2" }
        switch (hasV1, hasV2) {
        case (true, true): return .hybrid
        case (true, false): return .v1
        case (false, true): return .v2
        case (false, false):
            throw CgroupError(.unsupported, "no cgroup filesystem is mounted", path: files.path("/proc/self/mountinfo"))
        }
    }

    /// The layout of a process's cgroups.
    ///
    /// A cgroup outside this process's cgroup namespace (its path in `/proc/PID/cgroup` starts
    /// with `/..`) is placed exactly under a mount of the whole hierarchy seen from inside the
    /// namespace (mount root `/..`, `/../..`, …), such as the host's cgroup tree bind-mounted
    /// into a container; see ``layout(pid:preferringMountAt:)``.
    ///
    /// - Parameter pid: the process; `nil` means this process (`/proc/self`).
    /// - Returns: the mode, the memory cgroup and the cgroup2 group.
    /// - Throws: `CgroupError` when a file is missing or malformed, or the cgroup lies
    ///   outside this process's cgroup namespace and no mount shows it.
    package func layout(pid: Int32? = nil) throws(CgroupError) -> CgroupLayout {
        try layout(pid: pid, preferringMountAt: nil)
    }

    /// The layout of a process's cgroups, placed in one mount first when several mounts of a
    /// hierarchy show them.
    ///
    /// A node agent in a container compares a service's cgroup with a parent named under the
    /// host's cgroup tree, bind-mounted at (say) `/host/sys/fs/cgroup` beside the container's own
    /// `/sys/fs/cgroup`: both mounts may show the same cgroup, and the agent wants it named under
    /// the parent's. A cgroup outside this process's cgroup namespace, written
    /// `/../../a/b` (one `..` for each level above the namespace root), is placed under a mount
    /// whose root is written `/..` repeated (the mount shows the namespace root's ancestor that
    /// many levels up): the namespace root is the one cgroup that many levels below the mount's
    /// root that holds this process at its own cgroup path (its `cgroup.procs` lists this
    /// process), and the cgroup is its ancestor `j` levels up for `j` leading `..`, then `a/b`.
    ///
    /// - Parameters:
    ///   - pid: the process; `nil` means this process (`/proc/self`).
    ///   - mountPoint: the mount point to try first for each hierarchy; `nil` keeps
    ///     `mountinfo`'s order.
    /// - Returns: the mode, the memory cgroup and the cgroup2 group.
    /// - Throws: `CgroupError` when a file is missing or malformed (`.malformed` for a path
    ///   with `..` after a name), or `.outsideNamespace` when the cgroup lies outside this
    ///   process's cgroup namespace and no mount shows it, or the namespace root cannot be found
    ///   exactly under the mount that would.
    package func layout(pid: Int32?, preferringMountAt mountPoint: String?) throws(CgroupError) -> CgroupLayout {
        let found = try mounts()
        let mounts = mountPoint.map { point in found.filter { $0.mountPoint == point } + found.filter { $0.mountPoint != point } } ?? found
        let mode = try mode(mounts: mounts)
        let procPath = "/proc/\(pid.map(String.init) ?? "self")/cgroup"
        let memberships = try CgroupMembership.parse(files.read(procPath), path: files.path(procPath))
        let processID = pid ?? getpid()
        var notes: [String] = []

        var unified: CgroupLocation?
        let v1Memory = mounts.filter { $0.fileSystemType == "cgroup" && $0.superOptions.contains("memory") }
        let v2Mounts = mounts.filter { $0.fileSystemType == "cgroup2" }
        if let line = memberships.first(where: \.isUnified) {
            // The kernel writes the `0::` line once cgroup2 is mounted anywhere on the host, also
            // where this process sees no cgroup2 mount (runc on a hybrid host mounts the v1
            // hierarchies only). The group is needed only when it holds memory: with memory on v1,
            // or no cgroup2 mount to place it in, it is left out with a note, not an error.
            do throws(CgroupError) {
                unified = try locate(line.path, version: .v2, in: v2Mounts, pid: processID)
            } catch  where !v1Memory.isEmpty || v2Mounts.isEmpty {
                notes.append("the cgroup2 group \(line.path) is left out (no PSI or freezer of its own): \(error.message)")
            }
        }
        var memory: CgroupLocation?
        if !v1Memory.isEmpty {
            guard let line = memberships.first(where: { $0.controllers.contains("memory") }) else {
                throw CgroupError(.malformed, "a v1 memory hierarchy is mounted but the process has no memory line", path: files.path(procPath))
            }
            // /proc/PID/cgroup is the kernel's own answer and is parsed whole (a path may hold
            // spaces and colons). libcgroup's lookup is asked too, as a check: its parse stops at
            // a space, so in `/app 2` it named `/app` — another cgroup, with another limit.
            if files.root == "/" {
                do {
                    let named = try Libcgroup.currentPath(pid: processID, controller: "memory")
                    if named != line.path {
                        notes.append("libcgroup named the memory cgroup \(named), \(procPath) names \(line.path); used \(procPath)")
                    }
                } catch {
                    notes.append("libcgroup could not look up the memory cgroup (\(error)); used \(procPath)")
                }
            }
            memory = try locate(line.path, version: .v1, in: v1Memory, pid: processID)
        } else if let unified, try unifiedHasMemory(unified) {
            memory = unified
        }
        return CgroupLayout(mode: mode, memory: memory, unified: unified, notes: notes)
    }

    /// The layout for a cgroup named by an operator (`memwarn status --cgroup PATH`).
    ///
    /// - Parameter cgroupPath: a path as written in `/proc/PID/cgroup` (`/system.slice/app`)
    ///   or an absolute path under a cgroup mount (`/sys/fs/cgroup/memory/app`).
    /// - Returns: the mode, the memory cgroup and (when it exists) the cgroup2 group.
    /// - Throws: `CgroupError` `.notFound` when no such cgroup exists, `.malformed` for a
    ///   path with `..`, `.noMemoryController` when no memory controller is mounted.
    package func layout(cgroupPath: String) throws(CgroupError) -> CgroupLayout {
        let components = cgroupPath.split(separator: "/")
        guard cgroupPath.hasPrefix("/"), !components.contains("..") else {
            throw CgroupError(.malformed, "a cgroup path must be absolute and free of \"..\"", path: cgroupPath)
        }
        let mounts = try mounts()
        let mode = try mode(mounts: mounts)
        let v1Memory = mounts.filter { $0.fileSystemType == "cgroup" && $0.superOptions.contains("memory") }
        let v2 = mounts.filter { $0.fileSystemType == "cgroup2" }
        let normalized = "/" + components.joined(separator: "/")

        func inMount(_ entries: [MountEntry], _ version: CgroupVersion) throws(CgroupError) -> CgroupLocation? {
            for entry in entries {
                let point = entry.mountPoint
                if normalized == point || normalized.hasPrefix(point + "/") {
                    let rest = String(normalized.dropFirst(point.count))
                    return CgroupLocation(version: version, mountPoint: point, path: rest.isEmpty ? "/" : rest)
                }
            }
            guard let entry = entries.first else { return nil }
            return try locate(normalized, version: version, in: [entry], pid: nil)
        }
        var memory: CgroupLocation?
        var unified: CgroupLocation?
        if !v1Memory.isEmpty {
            memory = try inMount(v1Memory, .v1)
            if let candidate = try? inMount(v2, .v2), files.exists(candidate.directory) { unified = candidate }
        } else {
            unified = try inMount(v2, .v2)
            if let unified, try unifiedHasMemory(unified) { memory = unified }
        }
        guard let target = memory else {
            throw CgroupError(.noMemoryController, "no memory controller is mounted (mode \(mode.rawValue))", path: cgroupPath)
        }
        guard files.exists(target.directory) else {
            throw CgroupError(.notFound, "no such cgroup", path: files.path(target.directory))
        }
        guard files.isDirectory(target.directory) else {
            throw CgroupError(.notFound, "not a cgroup: a cgroup is a directory, and this is a file", path: files.path(target.directory))
        }
        return CgroupLayout(mode: mode, memory: target, unified: unified)
    }

    func unifiedHasMemory(_ location: CgroupLocation) throws(CgroupError) -> Bool {
        let rootControllers = CgroupLocation(version: .v2, mountPoint: location.mountPoint, path: "/").file("cgroup.controllers")
        guard files.exists(rootControllers) else { return files.exists(location.file("memory.current")) }
        return try files.read(rootControllers).split(whereSeparator: \.isWhitespace).contains("memory")
    }
}

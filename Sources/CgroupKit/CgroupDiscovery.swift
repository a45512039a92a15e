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
public struct CgroupDiscovery: Sendable {
    /// Where the kernel files are read.
    public var files: KernelFiles

    /// Discovery on the given files (the real host by default).
    ///
    /// - Parameter files: where the kernel files are read.
    public init(files: KernelFiles = .host) {
        self.files = files
    }

    /// The cgroup mounts visible to this process.
    ///
    /// - Returns: the `cgroup` and `cgroup2` entries of `/proc/self/mountinfo`, in its order.
    /// - Throws: ``CgroupError`` when `mountinfo` cannot be read or is malformed.
    public func mounts() throws(CgroupError) -> [MountEntry] {
        let path = "/proc/self/mountinfo"
        return try MountEntry.parse(files.read(path), path: files.path(path))
            .filter { $0.fileSystemType == "cgroup" || $0.fileSystemType == "cgroup2" }
    }

    /// The host's cgroup mode.
    ///
    /// - Parameter mounts: the cgroup mounts, as ``mounts()`` returns them.
    /// - Returns: `.v1`, `.v2` or `.hybrid` (both mounted).
    /// - Throws: ``CgroupError`` `.unsupported` when no cgroup filesystem is mounted.
    public func mode(mounts: [MountEntry]) throws(CgroupError) -> CgroupMode {
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
    /// - Parameter pid: the process; `nil` means this process (`/proc/self`).
    /// - Returns: the mode, the memory cgroup and the cgroup2 group.
    /// - Throws: ``CgroupError`` when a file is missing or malformed, or the cgroup lies
    ///   outside this process's cgroup namespace.
    public func layout(pid: Int32? = nil) throws(CgroupError) -> CgroupLayout {
        let mounts = try mounts()
        let mode = try mode(mounts: mounts)
        let procPath = "/proc/\(pid.map(String.init) ?? "self")/cgroup"
        let memberships = try CgroupMembership.parse(files.read(procPath), path: files.path(procPath))
        let processID = pid ?? getpid()
        var notes: [String] = []

        var unified: CgroupLocation?
        if let line = memberships.first(where: \.isUnified) {
            unified = try locate(line.path, version: .v2, in: mounts.filter { $0.fileSystemType == "cgroup2" }, pid: processID)
        }
        var memory: CgroupLocation?
        let v1Memory = mounts.filter { $0.fileSystemType == "cgroup" && $0.superOptions.contains("memory") }
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
    /// - Throws: ``CgroupError`` `.notFound` when no such cgroup exists, `.malformed` for a
    ///   path with `..`, `.noMemoryController` when no memory controller is mounted.
    public func layout(cgroupPath: String) throws(CgroupError) -> CgroupLayout {
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

    /// Places a namespace-relative cgroup path inside one of the mounts of its hierarchy.
    func locate(_ cgroupPath: String, version: CgroupVersion, in mounts: [MountEntry], pid: Int32?) throws(CgroupError) -> CgroupLocation {
        var lastError = CgroupError(.notFound, "no \(version.rawValue) mount shows this cgroup", path: cgroupPath)
        for mount in mounts {
            do throws(CgroupError) {
                switch try Self.resolve(cgroupPath: cgroupPath, mountRoot: mount.root) {
                case .inside(let path):
                    return CgroupLocation(version: version, mountPoint: mount.mountPoint, path: path)
                case .belowUnnamedAncestors(let depth, let rest):
                    guard let pid else {
                        throw CgroupError(
                            .outsideNamespace,
                            "the mount's root \(mount.root) lies above this cgroup namespace; name the cgroup by its path under \(mount.mountPoint)",
                            path: cgroupPath)
                    }
                    return try findNamespaceRoot(mount: mount, version: version, depth: depth, rest: rest, pid: pid)
                }
            } catch {
                lastError = error
            }
        }
        throw lastError
    }

    /// How a cgroup path relates to a mount's root.
    enum Resolution: Equatable {
        /// The cgroup is at this path inside the mount.
        case inside(String)
        /// The mount's root lies `depth` levels above the namespace root, whose names are
        /// invisible; the cgroup is `rest` below the namespace root.
        case belowUnnamedAncestors(depth: Int, rest: String)
    }

    /// Resolves a `/proc/PID/cgroup` path against a mountinfo root. Both are relative to the
    /// reader's cgroup-namespace root.
    ///
    /// - Throws: ``CgroupError`` `.outsideNamespace` when the cgroup path climbs out of the
    ///   namespace (`/..`), `.notFound` when the mount does not contain the cgroup.
    static func resolve(cgroupPath: String, mountRoot: String) throws(CgroupError) -> Resolution {
        let path = cgroupPath.split(separator: "/")
        let root = mountRoot.split(separator: "/")
        guard !path.contains("..") else {
            throw CgroupError(.outsideNamespace, "the cgroup lies outside this process's cgroup namespace", path: cgroupPath)
        }
        let ups = root.prefix { $0 == ".." }.count
        if ups > 0 {
            guard ups == root.count else {
                throw CgroupError(.notFound, "mount root \(mountRoot) is beside, not above, this cgroup namespace", path: cgroupPath)
            }
            return .belowUnnamedAncestors(depth: ups, rest: "/" + path.joined(separator: "/"))
        }
        guard path.starts(with: root) else {
            throw CgroupError(.notFound, "not inside the mount's root \(mountRoot)", path: cgroupPath)
        }
        return .inside("/" + path.dropFirst(root.count).joined(separator: "/"))
    }

    /// Finds the namespace root `depth` levels below a mount's root: the one directory at
    /// that depth whose `rest` holds `pid` in its `cgroup.procs`.
    func findNamespaceRoot(mount: MountEntry, version: CgroupVersion, depth: Int, rest: String, pid: Int32) throws(CgroupError) -> CgroupLocation {
        var level = ["/"]
        for _ in 0..<depth {
            var next: [String] = []
            for path in level {
                let directory = CgroupLocation(version: version, mountPoint: mount.mountPoint, path: path)
                for name in (try? files.list(directory.directory)) ?? [] where files.exists(directory.child(name).file("cgroup.procs")) {
                    next.append(directory.child(name).path)
                }
            }
            level = next
        }
        let wanted = String(pid)
        let matches = level.compactMap { base -> CgroupLocation? in
            let candidate = CgroupLocation(version: version, mountPoint: mount.mountPoint, path: rest == "/" ? base : base + rest)
            guard let procs = try? files.read(candidate.file("cgroup.procs")) else { return nil }
            return procs.split(separator: "\n").contains { $0 == wanted } ? candidate : nil
        }
        guard matches.count == 1, let match = matches.first else {
            throw CgroupError(
                .outsideNamespace,
                "the mount's root \(mount.root) lies above this cgroup namespace and \(matches.isEmpty ? "no" : "more than one") cgroup \(depth) levels down holds pid \(pid)",
                path: rest)
        }
        return match
    }
}

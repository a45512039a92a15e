#if canImport(Glibc)
import Glibc
#endif

/// Placing a cgroup path, written relative to this process's cgroup-namespace root, in a mount.
///
/// The kernel writes every cgroup path — in `/proc/PID/cgroup` and in mountinfo's root field —
/// relative to the *reader's* namespace root: one `..` for each level up to the common ancestor,
/// then the names down from it. In a container with a private cgroup namespace whose root `N`
/// lies `k` levels below the hierarchy's root, the host's tree bind-mounted into the container
/// has the root `/..` repeated `k` times, and a cgroup in a sibling subtree reads
/// `/../../a/b`: `N`'s ancestor two levels up, then `a/b`. Such a path is placed exactly: `N`
/// is the one directory `k` levels below that mount whose descendant at this process's own
/// cgroup path lists this process in `cgroup.procs` (a process is in one cgroup of a
/// hierarchy), and the cgroup is then the first `k − j` names of `N` (for `j` leading `..`)
/// and `a/b`, inside that mount. Nothing else is guessed: what cannot be placed so is an error.
extension CgroupDiscovery {
    /// Places a namespace-relative cgroup path inside one of the mounts of its hierarchy.
    ///
    /// - Parameters:
    ///   - cgroupPath: the path as `/proc/PID/cgroup` writes it.
    ///   - version: the hierarchy's version.
    ///   - mounts: the hierarchy's mounts, tried in order.
    ///   - pid: the process whose cgroup it is (`nil`: a path named by an operator, which is
    ///     never placed below a namespace root it cannot name).
    /// - Returns: the cgroup in the first mount that shows it.
    /// - Throws: `CgroupError`: when a mount would show the cgroup but it cannot be placed
    ///   there, the first such mount's reason; else why the first mount cannot show it.
    func locate(_ cgroupPath: String, version: CgroupVersion, in mounts: [MountEntry], pid: Int32?) throws(CgroupError) -> CgroupLocation {
        var refusal: CgroupError?
        var failure: CgroupError?
        for mount in mounts {
            let resolution: Resolution
            do throws(CgroupError) {
                resolution = try Self.resolve(cgroupPath: cgroupPath, mountRoot: mount.root)
            } catch {
                refusal = refusal ?? error
                continue
            }
            do throws(CgroupError) {
                switch resolution {
                case .inside(let path):
                    return CgroupLocation(version: version, mountPoint: mount.mountPoint, path: path)
                case .belowUnnamedAncestors(let depth, let rest):
                    guard let pid else { throw Self.unnamedAncestors(mount, cgroupPath) }
                    return try findNamespaceRoot(mount: mount, version: version, depth: depth, rest: rest, pid: pid)
                case .besideNamespaceRoot(let up, let depth, let rest):
                    guard pid != nil else { throw Self.unnamedAncestors(mount, cgroupPath) }
                    return try placeBeside(cgroupPath, up: up, depth: depth, rest: rest, mount: mount, version: version)
                }
            } catch {
                failure = failure ?? error
            }
        }
        throw failure ?? refusal ?? CgroupError(.notFound, "no \(version.rawValue) mount shows this cgroup", path: cgroupPath)
    }

    /// Thrown where the caller is.
    private static func unnamedAncestors(_ mount: MountEntry, _ cgroupPath: String, file: String = #fileID, line: Int = #line) -> CgroupError {
        CgroupError(
            .outsideNamespace,
            "the mount's root \(mount.root) lies above this cgroup namespace; name the cgroup by its path under \(mount.mountPoint)",
            path: cgroupPath, file: file, line: line)
    }

    /// How a cgroup path relates to a mount's root.
    enum Resolution: Equatable {
        /// The cgroup is at this path inside the mount.
        case inside(String)
        /// The mount's root lies `depth` levels above the namespace root, whose names are
        /// invisible; the cgroup is `rest` below the namespace root.
        case belowUnnamedAncestors(depth: Int, rest: String)
        /// The cgroup is `rest` below the namespace root's ancestor `up` levels up, and the
        /// mount's root is the namespace root's ancestor `depth` (at least `up`) levels up: the
        /// cgroup is inside the mount, at the first `depth − up` names of the namespace root's
        /// path in the mount, then `rest`.
        case besideNamespaceRoot(up: Int, depth: Int, rest: String)
    }

    /// Resolves a `/proc/PID/cgroup` path against a mountinfo root. Both are relative to the
    /// reader's cgroup-namespace root, and `..` may only lead them (the kernel writes no other).
    ///
    /// - Throws: `CgroupError` `.malformed` for `..` after a name (or a `.`), `.notFound`
    ///   when the mount does not contain the cgroup, `.outsideNamespace` when the cgroup lies
    ///   above the namespace root and the mount shows nothing above it.
    static func resolve(cgroupPath: String, mountRoot: String) throws(CgroupError) -> Resolution {
        let path = cgroupPath.split(separator: "/")
        let root = mountRoot.split(separator: "/")
        let up = path.prefix { $0 == ".." }.count
        let ups = root.prefix { $0 == ".." }.count
        guard !path.dropFirst(up).contains(".."), !path.contains(".") else {
            throw CgroupError(.malformed, "\"..\" may only lead a cgroup path, one for each level above the namespace root", path: cgroupPath)
        }
        guard !root.dropFirst(ups).contains(".."), !root.contains(".") else {
            throw CgroupError(.malformed, "mount root \(mountRoot) has \"..\" after a name", path: cgroupPath)
        }
        let rest = "/" + path.dropFirst(up).joined(separator: "/")
        if ups > 0 {
            guard ups == root.count else {
                throw CgroupError(.notFound, "mount root \(mountRoot) is beside, not above, this cgroup namespace", path: cgroupPath)
            }
            guard up > 0 else { return .belowUnnamedAncestors(depth: ups, rest: rest) }
            guard up <= ups else {
                throw CgroupError(
                    .outsideNamespace, "the cgroup lies \(up) levels above this cgroup namespace's root, above the mount's root \(mountRoot)",
                    path: cgroupPath)
            }
            return .besideNamespaceRoot(up: up, depth: ups, rest: rest)
        }
        guard up == 0 else {
            throw CgroupError(
                .outsideNamespace, "the cgroup lies outside this process's cgroup namespace, and the mount's root \(mountRoot) inside it",
                path: cgroupPath)
        }
        guard path.starts(with: root) else {
            throw CgroupError(.notFound, "not inside the mount's root \(mountRoot)", path: cgroupPath)
        }
        return .inside("/" + path.dropFirst(root.count).joined(separator: "/"))
    }

    /// Finds the namespace root `depth` levels below a mount's root: the one directory at
    /// that depth whose `rest` holds `pid` in its `cgroup.procs`.
    func findNamespaceRoot(mount: MountEntry, version: CgroupVersion, depth: Int, rest: String, pid: Int32) throws(CgroupError) -> CgroupLocation {
        let base = try namespaceRoot(in: mount, version: version, depth: depth, holding: pid, at: rest, path: rest)
        return CgroupLocation(version: version, mountPoint: mount.mountPoint, path: rest == "/" ? base : base + rest)
    }

    /// Places a cgroup `up` levels above the namespace root, then `rest`, in a mount whose root
    /// is `depth` levels above it: the namespace root is found by this process's own cgroup.
    ///
    /// - Throws: `CgroupError` `.outsideNamespace` when the namespace root cannot be found
    ///   exactly, `.notFound` when the cgroup it places is not there (it has gone).
    func placeBeside(
        _ cgroupPath: String, up: Int, depth: Int, rest: String, mount: MountEntry, version: CgroupVersion
    ) throws(CgroupError) -> CgroupLocation {
        let namespaceRoot: String
        do throws(CgroupError) {
            let own = try ownCgroupPath(in: mount, version: version)
            namespaceRoot = try self.namespaceRoot(in: mount, version: version, depth: depth, holding: getpid(), at: own, path: cgroupPath)
        } catch {
            throw CgroupError(
                error.code, "the cgroup lies \(up) levels above this cgroup namespace's root, which must be found under \(mount.mountPoint): \(error.message)",
                path: cgroupPath, errno: error.errno)
        }
        let names = namespaceRoot.split(separator: "/").prefix(depth - up) + rest.split(separator: "/")
        let location = CgroupLocation(version: version, mountPoint: mount.mountPoint, path: "/" + names.joined(separator: "/"))
        guard files.isDirectory(location.directory) else {
            throw CgroupError(.notFound, "placed at \(location.directory) (namespace root \(namespaceRoot)), which is not a cgroup", path: cgroupPath)
        }
        return location
    }

    /// This process's own cgroup in a mount's hierarchy, as `/proc/self/cgroup` writes it.
    ///
    /// - Throws: `CgroupError` `.malformed` when the file has no line for the hierarchy,
    ///   `.outsideNamespace` when this process's own cgroup lies outside its namespace.
    func ownCgroupPath(in mount: MountEntry, version: CgroupVersion) throws(CgroupError) -> String {
        let procPath = "/proc/self/cgroup"
        let memberships = try CgroupMembership.parse(files.read(procPath), path: files.path(procPath))
        let line =
            version == .v2
            ? memberships.first(where: \.isUnified)
            : memberships.first { !$0.isUnified && $0.controllers.contains { mount.superOptions.contains($0) } }
        guard let path = line?.path else {
            throw CgroupError(.malformed, "no line for the hierarchy mounted at \(mount.mountPoint)", path: files.path(procPath))
        }
        let components = path.split(separator: "/")
        guard !components.contains(".."), !components.contains(".") else {
            throw CgroupError(.outsideNamespace, "this process's own cgroup \(path) lies outside its cgroup namespace", path: files.path(procPath))
        }
        return "/" + components.joined(separator: "/")
    }

    /// The namespace root's path inside a mount whose root lies `depth` levels above it: the one
    /// directory that many levels down whose descendant at `rest` lists `pid` in `cgroup.procs`.
    ///
    /// - Parameters:
    ///   - path: the cgroup path an error names.
    /// - Throws: `CgroupError` `.outsideNamespace` when no directory or more than one does.
    private func namespaceRoot(
        in mount: MountEntry, version: CgroupVersion, depth: Int, holding pid: Int32, at rest: String, path: String
    ) throws(CgroupError) -> String {
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
        let matches = level.filter { base in
            let candidate = CgroupLocation(version: version, mountPoint: mount.mountPoint, path: rest == "/" ? base : base + rest)
            guard let procs = try? files.read(candidate.file("cgroup.procs")) else { return false }
            return procs.split(separator: "\n").contains { $0 == wanted }
        }
        guard matches.count == 1, let match = matches.first else {
            throw CgroupError(
                .outsideNamespace,
                "the mount's root \(mount.root) lies above this cgroup namespace and \(matches.isEmpty ? "no" : "more than one") cgroup \(depth) levels down holds pid \(pid)",
                path: path)
        }
        return match
    }
}

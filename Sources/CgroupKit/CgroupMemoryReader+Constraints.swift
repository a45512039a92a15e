extension CgroupMemoryReader {
    /// Every limit that applies to the cgroup, nearest first, each with the usage it is measured
    /// against: the cgroup's own limit with its own usage, then each ancestor visible in the mount
    /// that has a limit, with that ancestor's usage.
    ///
    /// - cgroup v1: `memory.limit_in_bytes` of the cgroup and of each ancestor up to the mount's
    ///   root, as long as the ancestors account their children (`memory.use_hierarchy`, always 1
    ///   since Linux 5.11). When `memory.stat`'s `hierarchical_memory_limit` is lower than every
    ///   limit found, an ancestor above the cgroup namespace sets it: it is added last as a hidden
    ///   constraint (``MemoryConstraint/isHidden``), measured against the cgroup's own usage.
    /// - cgroup v2: the lower of `memory.max` and `memory.high` of the cgroup and each ancestor up
    ///   to the mount's root, with that cgroup's `memory.current`. Ancestors above a cgroup
    ///   namespace are not visible and cgroup v2 names no hierarchical limit: they are not counted.
    ///
    /// - Parameter includingAncestors: `false` reads the cgroup's own limit alone (the policy's
    ///   `ancestor_limits = ignore`).
    /// - Returns: the constraints, nearest first; empty when no limit applies.
    /// - Throws: `CgroupError` `.notFound` when the cgroup is gone, `.noMemoryController` when a
    ///   file is missing in a cgroup that exists, `.malformed` for a file that cannot be parsed.
    package func constraints(includingAncestors: Bool = true) throws(CgroupError) -> [MemoryConstraint] {
        try constraints(along: includingAncestors ? limitedAncestors() : nil)
    }

    /// ``constraints(includingAncestors:)``, each usage less its cgroup's inactive page cache
    /// when `leavingOutInactiveFile` (``MemoryConstraint/inactiveFileBytes``; the policy's
    /// `inactive_page_cache = ignore`).
    ///
    /// - Parameters:
    ///   - includingAncestors: `false` reads the cgroup's own limit alone.
    ///   - leavingOutInactiveFile: whether each usage is read less its inactive page cache.
    /// - Returns: the constraints, nearest first; empty when no limit applies.
    /// - Throws: `CgroupError` as ``constraints(includingAncestors:)``, and `.malformed` for a
    ///   `memory.stat` without its inactive page cache line.
    package func constraints(includingAncestors: Bool = true, leavingOutInactiveFile: Bool) throws(CgroupError) -> [MemoryConstraint] {
        try constraints(along: includingAncestors ? limitedAncestors() : nil, leavingOutInactiveFile: leavingOutInactiveFile)
    }

    /// Finds which ancestors set a limit (`LimitedAncestors`): a walk up the mount reading each
    /// level's limit (and on v1 `memory.use_hierarchy`, and the cgroup's `memory.stat` for a limit
    /// set above the namespace). Costlier than a reading; the result stays valid until an
    /// ancestor gains or loses a limit, so a frequent reader walks now and then
    /// (``constraints(along:)`` reads the limits and usage it names each time).
    ///
    /// - Returns: the limited ancestors, nearest first, and a hidden limit (v1).
    /// - Throws: `CgroupError` as ``constraints(includingAncestors:)``.
    package func limitedAncestors() throws(CgroupError) -> LimitedAncestors {
        var found = LimitedAncestors(cgroups: [], hiddenLimitBytes: nil)
        var lowest = UInt64.max
        if let own = try ownLimit() { lowest = own.bytes }
        var level = location
        while let parent = level.parent {
            if location.version == .v1, try !Self.accountsChildren(parent, files: files) { break }
            if let limit = try CgroupMemoryReader(location: parent, files: files).ownLimit(),
                parent.version == .v1 || files.exists(parent.file("memory.current"))
            {
                found.cgroups.append(parent)
                lowest = min(lowest, limit.bytes)
            }
            level = parent
        }
        if location.version == .v1, let hierarchical = try stat()["hierarchical_memory_limit"], hierarchical < CgroupValues.v1Unlimited, hierarchical < lowest {
            found.hiddenLimitBytes = hierarchical
        }
        return found
    }

    /// The limits that apply, read now: the cgroup's own, each ancestor `ancestors` names (one
    /// whose limit was removed since is left out), and the hidden limit it names, each with the
    /// usage it is measured against.
    ///
    /// - Parameter ancestors: what `limitedAncestors()` found, or `nil` for the own limit alone.
    /// - Returns: the constraints, nearest first; empty when no limit applies.
    /// - Throws: `CgroupError` as ``constraints(includingAncestors:)``.
    package func constraints(along ancestors: LimitedAncestors?) throws(CgroupError) -> [MemoryConstraint] {
        try constraints(along: ancestors, leavingOutInactiveFile: false)
    }

    /// ``constraints(along:)``, each usage less its cgroup's inactive page cache when
    /// `leavingOutInactiveFile` (``MemoryConstraint/inactiveFileBytes``): `memory.stat` is read
    /// beside each usage file.
    ///
    /// - Parameters:
    ///   - ancestors: what `limitedAncestors()` found, or `nil` for the own limit alone.
    ///   - leavingOutInactiveFile: whether each usage is read less its inactive page cache.
    /// - Returns: the constraints, nearest first; empty when no limit applies.
    /// - Throws: `CgroupError` as ``constraints(includingAncestors:leavingOutInactiveFile:)``.
    package func constraints(along ancestors: LimitedAncestors?, leavingOutInactiveFile: Bool) throws(CgroupError) -> [MemoryConstraint] {
        if location.version == .v2 {
            guard files.exists(location.directory) else { throw CgroupError(.notFound, "no such cgroup", path: files.path(location.directory)) }
            guard files.exists(location.file("memory.current")) else {
                throw CgroupError(.noMemoryController, "the memory controller is not enabled for this cgroup", path: files.path(location.directory))
            }
        }
        var found: [MemoryConstraint] = []
        var ownUsage: MeasuredUsage?
        if let own = try ownLimit() {
            let usage = try measuredUsage(leavingOutInactiveFile: leavingOutInactiveFile)
            ownUsage = usage
            found.append(MemoryConstraint(cgroupPath: location.path, usageBytes: usage.bytes, limit: own, inactiveFileBytes: usage.inactiveFileBytes))
        }
        for ancestor in ancestors?.cgroups ?? [] {
            let reader = CgroupMemoryReader(location: ancestor, files: files)
            guard let limit = try reader.ownLimit() else { continue }
            let usage = try reader.measuredUsage(leavingOutInactiveFile: leavingOutInactiveFile)
            found.append(MemoryConstraint(cgroupPath: ancestor.path, usageBytes: usage.bytes, limit: limit, inactiveFileBytes: usage.inactiveFileBytes))
        }
        if let hidden = ancestors?.hiddenLimitBytes {
            let usage: MeasuredUsage
            if let ownUsage { usage = ownUsage } else { usage = try measuredUsage(leavingOutInactiveFile: leavingOutInactiveFile) }
            found.append(
                MemoryConstraint(
                    cgroupPath: location.path, usageBytes: usage.bytes,
                    limit: EffectiveLimit(bytes: hidden, file: "hierarchical_memory_limit", cgroupPath: location.path),
                    isHidden: true, inactiveFileBytes: usage.inactiveFileBytes))
        }
        return found
    }

    /// The cgroup's own limit: v1 `memory.limit_in_bytes`; v2 the lower of `memory.max` and
    /// `memory.high` (either may be absent at a namespace's or the host's root); `nil` for none.
    func ownLimit() throws(CgroupError) -> EffectiveLimit? {
        switch location.version {
        case .v1:
            let bytes = try CgroupValues.limit(read("memory.limit_in_bytes"), path: files.path(location.file("memory.limit_in_bytes")))
            return bytes.map { EffectiveLimit(bytes: $0, file: "memory.limit_in_bytes", cgroupPath: location.path) }
        case .v2:
            var lowest: EffectiveLimit?
            for name in ["memory.max", "memory.high"] where files.exists(location.file(name)) {
                let path = location.file(name)
                if let bytes = try CgroupValues.limit(files.read(path), path: files.path(path)), bytes < lowest?.bytes ?? .max {
                    lowest = EffectiveLimit(bytes: bytes, file: name, cgroupPath: location.path)
                }
            }
            return lowest
        }
    }

    /// Whether cgroups above the mount's root exist that this process cannot see (it runs in a
    /// cgroup namespace): on cgroup v2 the root of a host has no `memory.max`, while a namespace's
    /// root (a container's own cgroup) has one. A limit set above it (a pod's, a slice's) is not
    /// counted by ``constraints(includingAncestors:)``: cgroup v2 names no hierarchical limit.
    /// cgroup v1 reports such a limit itself (a hidden constraint), so this is `false` there.
    ///
    /// - Returns: whether the mount's root is a cgroup namespace's root (cgroup v2 only).
    package func ancestorsHiddenByNamespace() -> Bool {
        guard location.version == .v2 else { return false }
        var root = location
        while let parent = root.parent { root = parent }
        return files.exists(root.file("memory.max"))
    }

    /// Whether a v1 cgroup charges its children's usage to itself (and so their usage counts
    /// against its limit): `memory.use_hierarchy` is 1, or absent (kernels where it always is).
    private static func accountsChildren(_ cgroup: CgroupLocation, files: KernelFiles) throws(CgroupError) -> Bool {
        let file = cgroup.file("memory.use_hierarchy")
        guard files.exists(file) else { return true }
        return try CgroupValues.number(files.read(file), path: files.path(file)) != 0
    }
}

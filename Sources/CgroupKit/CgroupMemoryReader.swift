/// Event counters of a memory cgroup.
///
/// cgroup v2: `memory.events` (`low high max oom oom_kill oom_group_kill`). cgroup v1 has
/// only `oom_kill` (from `memory.oom_control`) and `max` (from `memory.failcnt`, the times
/// usage hit the limit); the others stay 0.
package struct MemoryEventCounters: Sendable, Hashable, Codable {
    /// Times usage went below `memory.low` protection and was reclaimed anyway.
    package var low: UInt64 = 0
    /// Times usage went over `memory.high` and was throttled.
    package var high: UInt64 = 0
    /// Times usage was about to go over the hard limit.
    package var max: UInt64 = 0
    /// Times the cgroup ran out of memory.
    package var oom: UInt64 = 0
    /// Processes killed by the OOM killer in the cgroup.
    package var oomKill: UInt64 = 0
    /// Group OOM kills.
    package var oomGroupKill: UInt64 = 0

    /// Creates counters; each parameter sets the counter of the same name.
    ///
    /// - Parameters:
    ///   - low: times usage went below `memory.low` protection and was reclaimed anyway.
    ///   - high: times usage went over `memory.high` and was throttled.
    ///   - max: times usage was about to go over the hard limit.
    ///   - oom: times the cgroup ran out of memory.
    ///   - oomKill: processes killed by the OOM killer in the cgroup.
    ///   - oomGroupKill: group OOM kills.
    package init(low: UInt64 = 0, high: UInt64 = 0, max: UInt64 = 0, oom: UInt64 = 0, oomKill: UInt64 = 0, oomGroupKill: UInt64 = 0) {
        self.low = low
        self.high = high
        self.max = max
        self.oom = oom
        self.oomKill = oomKill
        self.oomGroupKill = oomGroupKill
    }
}

/// Reads a memory cgroup's usage, limits, statistics and events, for v1 and v2 alike.
///
/// Each call reads the kernel's files afresh; nothing is cached.
package struct CgroupMemoryReader: Sendable {
    /// The cgroup read.
    package var location: CgroupLocation
    /// Where the files are read.
    package var files: KernelFiles

    /// A reader for one cgroup of this host.
    ///
    /// - Parameter location: the memory cgroup to read.
    package init(location: CgroupLocation) {
        self.init(location: location, files: .host)
    }

    /// A reader for one cgroup, its files read under `files` (a directory of captured files in tests).
    package init(location: CgroupLocation, files: KernelFiles) {
        self.location = location
        self.files = files
    }

    /// The name of the usage file: `memory.usage_in_bytes` (v1) or `memory.current` (v2).
    package var usageFile: String { location.version == .v1 ? "memory.usage_in_bytes" : "memory.current" }

    /// Current usage in bytes.
    ///
    /// - Returns: the usage file's value, in bytes.
    /// - Throws: `CgroupError` `.noMemoryController` when the file is missing in a cgroup
    ///   that exists, `.notFound` when the cgroup itself is gone, `.malformed`.
    package func usage() throws(CgroupError) -> UInt64 {
        try CgroupValues.number(read(usageFile), path: files.path(location.file(usageFile)))
    }

    /// The `memory.stat` key of the cgroup's inactive page cache, its children's included:
    /// `total_inactive_file` on cgroup v1 (`inactive_file` there is the cgroup's own pages
    /// alone), `inactive_file` on v2 (where every count is hierarchical).
    package var inactiveFileKey: String { location.version == .v1 ? "total_inactive_file" : "inactive_file" }

    /// The cgroup's inactive page cache, its children's included (`inactiveFileKey`): file
    /// pages not used lately, which the kernel takes back first at the limit.
    ///
    /// - Returns: the bytes.
    /// - Throws: `CgroupError` `.notFound` when the cgroup is gone, `.noMemoryController`
    ///   when a file is missing in a cgroup that exists, `.malformed` when the key is missing or
    ///   its value is not a number.
    package func inactiveFileBytes() throws(CgroupError) -> UInt64 {
        guard let bytes = try stat()[inactiveFileKey] else {
            throw CgroupError(.malformed, "no \(inactiveFileKey) line", path: files.path(location.file("memory.stat")))
        }
        return bytes
    }

    /// Usage as the monitor measures it: the usage file's value, less the inactive page cache
    /// when it is left out.
    package struct MeasuredUsage: Sendable, Hashable {
        /// The usage counted against a limit.
        package var bytes: UInt64
        /// The inactive page cache left out of ``bytes``, or `nil` when it is counted.
        package var inactiveFileBytes: UInt64?
    }

    /// Reads usage, less the inactive page cache when `leavingOutInactiveFile` (both files are
    /// read, usage first; a difference below 0, page cache counted since the usage was read, is 0).
    package func measuredUsage(leavingOutInactiveFile: Bool) throws(CgroupError) -> MeasuredUsage {
        let usage = try usage()
        guard leavingOutInactiveFile else { return MeasuredUsage(bytes: usage) }
        let inactive = try inactiveFileBytes()
        return MeasuredUsage(bytes: usage - min(usage, inactive), inactiveFileBytes: inactive)
    }

    /// `memory.stat`, by key.
    ///
    /// - Returns: every line's value, by its key (such as `anon` or `file`).
    /// - Throws: `CgroupError` `.notFound` when the cgroup is gone, `.noMemoryController`
    ///   when a file is missing in a cgroup that exists, `.malformed`.
    package func stat() throws(CgroupError) -> [String: UInt64] {
        try CgroupValues.flatKeyed(read("memory.stat"), path: files.path(location.file("memory.stat")))
    }

    /// The lowest limit of the cgroup and all its ancestors visible in the mount, or `nil`
    /// when none is set.
    ///
    /// v1: the lower of `memory.limit_in_bytes` and `memory.stat`'s
    /// `hierarchical_memory_limit` (which covers ancestors, even those outside a namespace).
    /// v2: the lowest `memory.max` or `memory.high` from the cgroup up to the mount's root.
    ///
    /// - Returns: the lowest limit and where it is set, or `nil` when none is.
    /// - Throws: `CgroupError` `.notFound` when the cgroup is gone, `.noMemoryController`
    ///   when a file is missing in a cgroup that exists, `.malformed`.
    package func effectiveLimit() throws(CgroupError) -> EffectiveLimit? {
        var best: EffectiveLimit?
        func consider(_ bytes: UInt64?, _ file: String, _ path: String) {
            guard let bytes, bytes < (best?.bytes ?? .max) else { return }
            best = EffectiveLimit(bytes: bytes, file: file, cgroupPath: path)
        }
        switch location.version {
        case .v1:
            let own = try CgroupValues.limit(read("memory.limit_in_bytes"), path: files.path(location.file("memory.limit_in_bytes")))
            consider(own, "memory.limit_in_bytes", location.path)
            if let hierarchical = try stat()["hierarchical_memory_limit"] {
                consider(hierarchical >= CgroupValues.v1Unlimited ? nil : hierarchical, "hierarchical_memory_limit", location.path)
            }
        case .v2:
            guard files.exists(location.directory) else {
                throw CgroupError(.notFound, "no such cgroup", path: files.path(location.directory))
            }
            guard files.exists(location.file("memory.current")) else {
                throw CgroupError(.noMemoryController, "the memory controller is not enabled for this cgroup", path: files.path(location.directory))
            }
            var level: CgroupLocation? = location
            while let current = level {
                for file in ["memory.max", "memory.high"] where files.exists(current.file(file)) {
                    let text = try files.read(current.file(file))
                    consider(try CgroupValues.limit(text, path: files.path(current.file(file))), file, current.path)
                }
                level = current.parent
            }
        }
        return best
    }

    /// The highest usage the kernel recorded (v1 `memory.max_usage_in_bytes`, v2
    /// `memory.peak`), or `nil` on a v2 kernel without `memory.peak` (before 5.19).
    ///
    /// - Returns: the peak in bytes, or `nil`.
    /// - Throws: `CgroupError` `.notFound` when the cgroup is gone, `.noMemoryController`
    ///   when a file is missing in a cgroup that exists, `.malformed`.
    package func peakUsage() throws(CgroupError) -> UInt64? {
        let name = location.version == .v1 ? "memory.max_usage_in_bytes" : "memory.peak"
        guard location.version == .v1 || files.exists(location.file(name)) else { return nil }
        return try CgroupValues.number(read(name), path: files.path(location.file(name)))
    }

    /// The cgroup's memory event counters.
    ///
    /// - Returns: v2's `memory.events`; on v1, `oom_kill` and `max` (`memory.failcnt`).
    /// - Throws: `CgroupError` `.notFound` when the cgroup is gone, `.noMemoryController`
    ///   when a file is missing in a cgroup that exists, `.malformed`.
    package func events() throws(CgroupError) -> MemoryEventCounters {
        switch location.version {
        case .v2:
            let values = try CgroupValues.flatKeyed(read("memory.events"), path: files.path(location.file("memory.events")))
            return MemoryEventCounters(
                low: values["low"] ?? 0, high: values["high"] ?? 0, max: values["max"] ?? 0,
                oom: values["oom"] ?? 0, oomKill: values["oom_kill"] ?? 0, oomGroupKill: values["oom_group_kill"] ?? 0)
        case .v1:
            let control = try CgroupValues.flatKeyed(read("memory.oom_control"), path: files.path(location.file("memory.oom_control")))
            let failures = try CgroupValues.number(read("memory.failcnt"), path: files.path(location.file("memory.failcnt")))
            return MemoryEventCounters(max: failures, oomKill: control["oom_kill"] ?? 0)
        }
    }

    /// One of the cgroup's files, a missing one in a cgroup that exists reported as
    /// `.noMemoryController`.
    func read(_ name: String) throws(CgroupError) -> String {
        do {
            return try files.read(location.file(name))
        } catch  where error.code == .notFound && files.exists(location.directory) {
            throw CgroupError(
                .noMemoryController, "\(name) is missing: the memory controller is not enabled for this cgroup", path: files.path(location.file(name)),
                errno: error.errno)
        }
    }
}

public import CgroupKit
#if canImport(Glibc)
import Glibc
#endif

/// Reads one ``PressureSnapshot`` from the kernel's files for a cgroup layout.
public struct SnapshotSampler: Sendable {
    /// The cgroups read.
    public let layout: CgroupLayout
    /// Where the files are read.
    public let files: KernelFiles
    /// The PSI file read: the cgroup2 group's `memory.pressure` when it exists, else
    /// `/proc/pressure/memory`, else `nil` (a kernel without PSI).
    public let pressureFile: String?

    /// A sampler for a layout.
    ///
    /// - Parameters:
    ///   - layout: the cgroups to read, as CgroupKit's `CgroupDiscovery` finds them.
    ///   - files: where the kernel's files are read; the real host by default.
    public init(layout: CgroupLayout, files: KernelFiles = .host) {
        self.layout = layout
        self.files = files
        if let unified = layout.unified, files.exists(unified.file("memory.pressure")) {
            pressureFile = unified.file("memory.pressure")
        } else if files.exists("/proc/pressure/memory") {
            pressureFile = "/proc/pressure/memory"
        } else {
            pressureFile = nil
        }
    }

    /// The memory cgroup's reader, when there is a memory controller.
    public var reader: CgroupMemoryReader? {
        layout.memory.map { CgroupMemoryReader(location: $0, files: files) }
    }

    /// Reads usage, the effective limit, PSI, and (when no limit applies) `/proc/meminfo`.
    ///
    /// - Returns: the snapshot, stamped with the current time.
    /// - Throws: CgroupKit's `CgroupError` when a file is missing or malformed, including a
    ///   cgroup that was deleted (`.notFound`).
    public func sample() throws(CgroupError) -> PressureSnapshot {
        var usage: UInt64 = 0
        var limit: EffectiveLimit?
        if let reader {
            usage = try reader.usage()
            limit = try reader.effectiveLimit()
        }
        var system: SystemMemory?
        if limit == nil {
            let meminfo = try SystemMemory.parse(files.read("/proc/meminfo"), path: files.path("/proc/meminfo"))
            system = meminfo
            usage = meminfo.usedBytes
        }
        let pressure = try pressureFile.map { (path) throws(CgroupError) in try PressureStall.parse(files.read(path), path: files.path(path)) }
        return PressureSnapshot(time: Self.wallClock(), cgroup: layout.memory, usageBytes: usage, limit: limit, system: system, pressure: pressure, pressureFile: pressureFile)
    }

    static func wallClock() -> Duration {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return .seconds(now.tv_sec) + .nanoseconds(now.tv_nsec)
    }
}

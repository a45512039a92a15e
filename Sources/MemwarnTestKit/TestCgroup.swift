public import CgroupKit
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A cgroup made for a test, a benchmark or a VM scenario, always removed afterwards.
///
/// Two kinds: a uniquely named cgroup v1 memory cgroup below this process's own, made through
/// libcgroup with a limit (``init(limit:prefix:)``; use ``withTestCgroup(limit:_:)``, which kills
/// the hogs *it* started in the cgroup and removes the cgroup even when the body throws); and a
/// cgroup made with `mkdir` at a given place and configured by writing its files
/// (``init(at:settings:)``, the cgroup v2 scenarios' own cgroups), removed with its descendants
/// after `cgroup.kill` ended whatever still ran in them.
public final class TestCgroup: Sendable {
    /// The cgroup's location.
    public let location: CgroupLocation
    /// The limit set on it (0 when none was).
    public let limit: UInt64
    private let libcgroup: MemoryCgroup?

    /// Creates a child of this process's own memory cgroup with `memory.limit_in_bytes = limit`.
    ///
    /// - Throws: an error naming the cgroup when there is no v1 memory hierarchy or creation fails.
    public init(limit: UInt64, prefix: String = "memwarn-test") throws {
        let layout = try CgroupDiscovery().layout()
        guard let own = layout.memory, own.version == .v1 else {
            throw CgroupError(.noMemoryController, "test cgroups need a cgroup v1 memory hierarchy (mode \(layout.mode.rawValue))")
        }
        let cgroup = try MemoryCgroup(parent: own, name: "\(prefix)-\(getpid())-\(TestNames.next())", maximumBytes: limit)
        libcgroup = cgroup
        location = cgroup.location
        self.limit = limit
    }

    /// Makes the cgroup at `location` with `mkdir` and writes `settings` (file, value) in order,
    /// such as `memory.max`.
    ///
    /// - Throws: an error naming the file when `mkdir` or a write fails; nothing is left behind then.
    public init(at location: CgroupLocation, settings: [(file: String, value: String)] = []) throws {
        guard mkdir(location.directory, 0o755) == 0 else { throw KernelFiles.openError(errno, location.directory, writing: true) }
        self.location = location
        libcgroup = nil
        limit = settings.last { $0.file == "memory.max" || $0.file == "memory.limit_in_bytes" }.flatMap { UInt64($0.value) } ?? 0
        do {
            for setting in settings { try KernelFiles.host.write(setting.value, to: location.file(setting.file)) }
        } catch {
            rmdir(location.directory)
            throw error
        }
    }

    /// Makes a child made as ``init(at:settings:)``, with the memory controller enabled for it
    /// (`+memory` in this cgroup's `cgroup.subtree_control` first, on cgroup v2).
    public func child(_ name: String, settings: [(file: String, value: String)] = []) throws -> TestCgroup {
        if location.version == .v2 { try set("cgroup.subtree_control", to: "+memory") }
        return try TestCgroup(at: location.child(name), settings: settings)
    }

    /// Moves a process into the cgroup (it must be one the caller started).
    public func add(pid: Int32) throws {
        if let libcgroup { try libcgroup.add(pid: pid) } else { try set("cgroup.procs", to: String(pid)) }
    }

    /// The processes in the cgroup.
    public func processes() throws -> [Int32] {
        if let libcgroup { return try libcgroup.processes() }
        return try read("cgroup.procs").split(separator: "\n").compactMap { Int32($0) }
    }

    /// CgroupKit's reader for its memory files.
    package var reader: CgroupMemoryReader { CgroupMemoryReader(location: location) }

    /// Current usage, as the kernel reports it.
    public func usage() throws -> UInt64 { try reader.usage() }

    /// Writes one of its files, such as `memory.max`.
    public func set(_ file: String, to value: String) throws {
        try KernelFiles.host.write(value, to: location.file(file))
    }

    /// Reads one of its files as the kernel wrote it.
    public func read(_ file: String) throws -> String {
        try KernelFiles.host.read(location.file(file))
    }

    /// Whether its directory still exists.
    public var exists: Bool { KernelFiles.host.exists(location.directory) }

    /// Removes the cgroup; retries while the kernel still holds it busy. One made with `mkdir`
    /// on cgroup v2 is removed with its descendants, after `cgroup.kill` ended what ran in them.
    public func remove() throws {
        if let libcgroup { return try libcgroup.remove() }
        if exists && location.version == .v2 { _ = try? set("cgroup.kill", to: "1") }
        try Self.removeTree(location)
    }

    private static func removeTree(_ location: CgroupLocation) throws(CgroupError) {
        for name in (try? KernelFiles.host.list(location.directory)) ?? [] where KernelFiles.host.exists(location.child(name).file("cgroup.procs")) {
            try removeTree(location.child(name))
        }
        for _ in 0..<250 {
            if rmdir(location.directory) == 0 || errno == ENOENT { return }
            usleep(20_000)
        }
        throw KernelFiles.openError(errno, location.directory, writing: true)
    }
}

/// Runs `body` with a new test cgroup and always removes it afterwards, after killing the
/// hogs the body started (by pid) if they are still alive.
public func withTestCgroup<T>(limit: UInt64, _ body: (TestCgroup) async throws -> T) async throws -> T {
    let cgroup = try TestCgroup(limit: limit)
    let result: Result<T, any Error>
    do {
        result = .success(try await body(cgroup))
    } catch {
        result = .failure(error)
    }
    MemoryHog.terminateAll(in: cgroup)
    try cgroup.remove()
    return try result.get()
}

/// Unique names for test cgroups within one process.
enum TestNames {
    private static let counter = AtomicCounter()
    static func next() -> String {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return "\(counter.increment())-\(String(now.tv_nsec, radix: 36))"
    }
}

/// A process-wide counter.
final class AtomicCounter: Sendable {
    private let value = Atomic<Int>(0)
    func increment() -> Int { value.add(1, ordering: .relaxed).newValue }
}

public import CgroupKit
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A uniquely named cgroup v1 memory cgroup below this process's own, created through
/// libcgroup with a limit, for tests and benchmarks on real cgroups.
///
/// Use ``withTestCgroup(limit:_:)``: it kills the children *it* started in the cgroup and
/// removes the cgroup even when the body throws.
public final class TestCgroup: Sendable {
    /// The cgroup's location.
    public let location: CgroupLocation
    /// The limit set on it.
    public let limit: UInt64
    private let cgroup: MemoryCgroup

    /// Creates a child of this process's own memory cgroup with `memory.limit_in_bytes = limit`.
    ///
    /// - Throws: ``CgroupError`` when there is no v1 memory hierarchy or creation fails.
    public init(limit: UInt64, prefix: String = "memwarn-test") throws(CgroupError) {
        let layout = try CgroupDiscovery().layout()
        guard let own = layout.memory, own.version == .v1 else {
            throw CgroupError(.noMemoryController, "test cgroups need a cgroup v1 memory hierarchy (mode \(layout.mode.rawValue))")
        }
        cgroup = try MemoryCgroup(parent: own, name: "\(prefix)-\(getpid())-\(TestNames.next())", maximumBytes: limit)
        self.location = cgroup.location
        self.limit = limit
    }

    /// Moves a process into the cgroup (it must be one the caller started).
    public func add(pid: Int32) throws(CgroupError) { try cgroup.add(pid: pid) }

    /// The processes in the cgroup.
    public func processes() throws(CgroupError) -> [Int32] { try cgroup.processes() }

    /// Current usage, as the kernel reports it.
    public func usage() throws(CgroupError) -> UInt64 { try cgroup.reader.usage() }

    /// Removes the cgroup; retries while the kernel still holds it busy.
    public func remove() throws(CgroupError) { try cgroup.remove() }
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

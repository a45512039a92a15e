import CgroupKit
import MemwarnControl
import MemwarnMonitor
import MemwarnRelease
import MemwarnTestFixtures
import MemwarnTestKit
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// This process as a memwarn service in a pod of plain files: a parent `/pod` limited to 256 MiB
/// (at 100 MiB), this process in `/pod/app` below it (at 40 MiB), its monitor reading those
/// files, one consumer registered, and its real control endpoint in a scratch directory — what
/// the agent's in-process tests find, lease and ask.
enum PodService {
    static let mebibyte: UInt64 = 1 << 20
    /// The pod's parent cgroup.
    static let parent = CgroupLocation(version: .v2, mountPoint: "/sys/fs/cgroup", path: "/pod")

    /// Runs the service with `consumer` while `body` runs: `body` gets the host (to set usage),
    /// the control directory and the service's monitor.
    static func run(
        _ consumer: CacheFixtures.FakeConsumer, _ body: @escaping (SharedParentHost, String, PressureMonitor) async throws -> Void
    ) async throws {
        let host = try SharedParentHost(parentLimit: 256 * mebibyte)
        try host.setUsage(parent: 100 * mebibyte, app: 40 * mebibyte)
        try host.placeProcess(getpid())
        var configuration = MonitorConfiguration(environment: [:])
        configuration.files = host.files
        configuration.watchesPressureStall = false
        let monitor = PressureMonitor(configuration: configuration, logger: testLogger)
        let coordinator = ReleaseCoordinator(trimsHeap: false)
        coordinator.register(consumer)
        let scratch = ScratchDirectory()
        defer { scratch.remove() }
        let directory = scratch.file("memwarn")
        let control = ControlService(monitor: monitor, coordinator: coordinator, directory: directory, environment: [:], logger: testLogger)
        try await withRunningMonitor(monitor) { _ in
            let running = Task { await control.run() }
            defer { running.cancel() }
            _ = try #require(await control.started(), "the service's endpoint")
            try await body(host, directory, monitor)
        }
    }
}

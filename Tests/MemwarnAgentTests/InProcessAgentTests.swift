import CgroupKit
import MemwarnControl
import MemwarnMonitor
import MemwarnRelease
import MemwarnSystem
import MemwarnTestFixtures
import MemwarnTestKit
import Testing

@testable import MemwarnAgent

#if canImport(Glibc)
import Glibc
#endif

/// The node agent in this process, on fixtures: a pod of plain files (a parent `/pod` limited to
/// 256 MiB, this process's service in `/pod/app` below it) and the service's real control
/// endpoint in a scratch directory. No cgroup is made and no child is started; the agent's
/// search, lease, crossing, round, ask and end are the real ones, and so is the service's
/// monitor reading the same files.
struct InProcessAgentTests {
    static let mebibyte: UInt64 = 1 << 20

    @Test(.timeLimit(.minutes(1))) func theAgentFindsLeasesAndAsksTheServiceUnderItsParentAndEndsTheLeaseWhenItStops() async throws {
        let consumer = CacheFixtures.FakeConsumer("cache", tier: .caches, footprint: Int(64 * Self.mebibyte))
        try await PodService.run(consumer) { host, directory, monitor in
            let records = Locked<[AgentRecord]>([])
            let agent = NodeAgent(
                configuration: AgentConfiguration(parent: PodService.parent, minAvailableBytes: nil, controlDirectories: [directory], policy: PressurePolicy()),
                files: host.files
            ) { record in records.withLock { $0.append(record) } }
            let agentRun = Task { try await agent.run() }
            func events() -> [String] { records.withLock { $0.map(\.event) } }

            try await waitUntil(within: .seconds(10), "the service found and leased the parent") {
                monitor.coordinatedCgroups == ["/pod": getpid()]
            }
            let found = try #require(records.withLock { $0.first { $0.event == "found" } }, "\(events())")
            #expect(found.pid == getpid() && found.cgroup == "/pod/app", "\(found)")

            // Siblings take the parent past its warning mark: the agent asks its one service.
            try host.setUsage(parent: 218 * Self.mebibyte, app: 40 * Self.mebibyte)
            try await waitUntil(within: .seconds(10), "the agent's ask answered") { events().contains("ask") }
            try host.setUsage(parent: 150 * Self.mebibyte, app: 40 * Self.mebibyte)
            let ask = try #require(records.withLock { $0.first { $0.event == "ask" } })
            #expect(ask.pid == getpid() && ask.level == "warning", "\(ask)")
            #expect(consumer.requests.first?.tier == .caches, "the service released from its first tier: \(consumer.requests)")

            agentRun.cancel()
            try await agentRun.value
            #expect(events().first == "started" && events().last == "stopped", "\(events())")
            #expect(events().contains("crossing"), "\(events())")
            #expect(monitor.coordinatedCgroups.isEmpty, "a stopping agent ends its leases: the parent counts again at once")
        }
    }
}

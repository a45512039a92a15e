import CgroupKit
import Foundation
import MemwarnRelease
import MemwarnTestFixtures
import MemwarnTestKit
import Testing

@testable import MemwarnMonitor

#if canImport(Glibc)
import Glibc
#endif

/// The monitor on synthetic cgroup v1 and hybrid hosts (plain files, no kernel): an ordinary
/// user may not write `cgroup.event_control`, so the monitor samples usage, and the level logic
/// runs as on a real v1 host without root. Root may write any plain file and would register v1
/// notifications that plain files never send, so these run only as an ordinary user: in
/// `make test`'s step as nobody.
@Suite(.serialized, .enabled(if: geteuid() != 0, "as root the monitor registers v1 notifications plain files never send; make test runs this suite as nobody"))
struct SyntheticV1HostMonitorTests {
    static let limit: UInt64 = 128 << 20

    /// A v1 (or hybrid) host with the process in `/app`, limited to ``limit``.
    final class Host {
        let tree = SyntheticFileTree(prefix: "memwarn-synthetic-v1")

        init(unified: Bool) throws {
            try tree.writeV1Host(processCgroup: "/app", unified: unified)
            try tree.writeV1MemoryCgroup("/app", limit: SyntheticV1HostMonitorTests.limit)
        }

        func setUsage(_ fraction: Double) throws {
            try tree.overwrite(
                "/sys/fs/cgroup/memory/app/memory.usage_in_bytes",
                SyntheticFileTree.fixedWidth(UInt64(Double(SyntheticV1HostMonitorTests.limit) * fraction)))
        }
    }

    static func monitor(_ host: Host, policy: PressurePolicy = PressurePolicy()) -> PressureMonitor {
        SyntheticLevelScenarios.monitor(files: host.tree.files, policy: policy)
    }

    @Test(arguments: [false, true])
    func usageAcrossTheMarksIsFoundBySamplingWhereV1NotificationsAreRefused(unified: Bool) async throws {
        let host = try Host(unified: unified)
        let monitor = Self.monitor(host)
        #expect(monitor.arming?.usageWatch == .adaptiveSampling, "\(String(describing: monitor.arming?.usageWatch))")
        #expect(
            monitor.watchedSources.contains { $0.contains("memory/app/memory.usage_in_bytes") && $0.contains("cgroup.event_control") },
            "the sources say why usage is sampled: \(monitor.watchedSources)")
        try await withRunningMonitor(monitor) { iterator in
            let first = try await next(&iterator)
            #expect(first.source == .initial && first.level == .normal)
            #expect(first.snapshot.capacityBytes == Self.limit, "the v1 limit is read: \(String(describing: first.snapshot.capacityBytes))")
            try await SyntheticLevelScenarios.climbFindsBothMarks(&iterator, setUsage: host.setUsage)
        }
    }

    /// Hysteresis and the hold time on v1, as on v2 (`SyntheticHostMonitorTests`).
    @Test func aFallStepsDownOnlyBelowTheRecoveryMarkAndAfterTheHoldTime() throws {
        let host = try Host(unified: false)
        let engine = try DrivenEngine(files: host.tree.files)
        try engine.start()
        #expect(engine.level == .normal)
        try SyntheticLevelScenarios.fallStepsDownOnlyBelowTheRecoveryMarkAndAfterTheHoldTime(
            engine, holdTime: PressurePolicy().holdTime, setUsage: host.setUsage)
    }
}

import CgroupKit
import Foundation
import Memwarn
import MemwarnSystem
import MemwarnTestKit
import MetricsTestKit
import Testing

@testable import MemwarnMonitor

/// A monitor under a limited parent, on a synthetic cgroup v2 host (plain files in the shape of a
/// pod: no kernel, no root): the level comes from the limit with the least headroom, the parent's
/// usage counting its other children; a node agent's lease takes the parent out until the agent
/// ends (a real child process, watched through a real pidfd) or the lease runs out.
@Suite(.serialized)
struct SharedParentMonitorTests {
    static let mebibyte: UInt64 = 1 << 20

    static func monitor(_ host: SharedParentHost, policy: PressurePolicy = PressurePolicy()) -> PressureMonitor {
        var configuration = MonitorConfiguration(policy: policy, environment: [:])
        configuration.files = host.files
        configuration.watchesPressureStall = false
        return PressureMonitor(configuration: configuration, logger: testLogger)
    }

    @Test func aChildWithoutALimitTakesItsLevelFromTheParentsUsageAndLimit() async throws {
        let host = try SharedParentHost(parentLimit: 256 * Self.mebibyte)
        try host.setUsage(parent: 100 * Self.mebibyte, app: 10 * Self.mebibyte)
        let monitor = Self.monitor(host)
        #expect(monitor.watchedSources.first?.contains("/sys/fs/cgroup/pod/memory.current") == true, "\(monitor.watchedSources)")
        try await withRunningMonitor(monitor) { iterator in
            let first = try await next(&iterator)
            #expect(first.level == .normal && first.snapshot.binding?.cgroupPath == "/pod")
            #expect(first.snapshot.cgroupUsageBytes == 10 * Self.mebibyte && first.snapshot.usageBytes == 100 * Self.mebibyte)
            // A sibling grows: the app's own usage stays at 10 MiB, the parent's reaches 85 %.
            try host.setUsage(parent: 218 * Self.mebibyte, app: 10 * Self.mebibyte)
            let raised = try await next(&iterator, within: .seconds(5))
            #expect(raised.level == .warning && raised.source == .usageSample, "\(raised.level) from \(raised.source)")
            #expect(raised.snapshot.limit?.cgroupPath == "/pod" && raised.snapshot.cgroupUsageBytes == 10 * Self.mebibyte)
        }
    }

    @Test func metricsSayWhichLimitBindsAndShowBothUsages() async throws {
        let host = try SharedParentHost(parentLimit: 256 * Self.mebibyte, ownLimit: 100 * Self.mebibyte)
        try host.setUsage(parent: 240 * Self.mebibyte, app: 50 * Self.mebibyte)
        let metrics = TestMetrics()
        var configuration = MonitorConfiguration(policy: PressurePolicy(), environment: [:])
        configuration.files = host.files
        configuration.watchesPressureStall = false
        let monitor = PressureMonitor(configuration: configuration, logger: testLogger, metricsFactory: metrics)
        try await withRunningMonitor(monitor) { iterator in
            _ = try await next(&iterator)
        }
        #expect(try metrics.expectGauge("memwarn_binding_depth").lastValue == 1, "the parent binds: one level up")
        #expect(try metrics.expectGauge("memwarn_usage_bytes").lastValue == Double(240 * Self.mebibyte))
        #expect(try metrics.expectGauge("memwarn_cgroup_usage_bytes").lastValue == Double(50 * Self.mebibyte))
        #expect(try metrics.expectGauge("memwarn_limit_bytes").lastValue == Double(256 * Self.mebibyte))
    }

    @Test func theLimitWithTheLeastHeadroomBindsAndTheBindingMovesWithTheSiblings() async throws {
        // Own 100 MiB limit, 50 used (50 left); parent 256, 100 used (156 left): the own limit binds.
        let host = try SharedParentHost(parentLimit: 256 * Self.mebibyte, ownLimit: 100 * Self.mebibyte)
        try host.setUsage(parent: 100 * Self.mebibyte, app: 50 * Self.mebibyte)
        let monitor = Self.monitor(host)
        try await withRunningMonitor(monitor) { iterator in
            let first = try await next(&iterator)
            #expect(first.snapshot.binding?.cgroupPath == "/pod/app" && first.level == .normal)
            #expect(first.snapshot.constraints.map(\.cgroupPath) == ["/pod/app", "/pod"])
            // Siblings take the parent to 240 MiB: 16 left there, 50 in the app's own: the parent
            // binds, at 94 % of its limit, though the app's own usage did not move.
            try host.setUsage(parent: 240 * Self.mebibyte, app: 50 * Self.mebibyte)
            let raised = try await next(&iterator, within: .seconds(5))
            #expect(raised.level == .critical && raised.snapshot.binding?.cgroupPath == "/pod", "\(raised.level): \(raised.snapshot.constraints)")
        }
    }

    @Test func ignoringAncestorLimitsReadsTheOwnLimitAlone() throws {
        var policy = PressurePolicy()
        policy.countsAncestorLimits = false
        let host = try SharedParentHost(parentLimit: 256 * Self.mebibyte)
        try host.setUsage(parent: 250 * Self.mebibyte, app: 10 * Self.mebibyte)
        let monitor = Self.monitor(host, policy: policy)
        let first = try #require(monitor.latestEvent)
        #expect(first.snapshot.limit == nil && first.snapshot.system != nil && first.level == .normal, "\(first.snapshot)")
    }

    /// A monitor under a parent at 85 % of 256 MiB, leased to an "agent" (a real process of
    /// ours, whose end the monitor sees through its pidfd) that has answered the crossing (its
    /// ask reached the service): `body` gets them once the level is back to normal.
    static func withAnsweredLease(
        _ body: (SharedParentHost, PressureMonitor, LineChild, LevelEvent, inout AsyncStream<LevelEvent>.Iterator) async throws -> Void
    ) async throws {
        let host = try SharedParentHost(parentLimit: 256 * Self.mebibyte)
        try host.setUsage(parent: 218 * Self.mebibyte, app: 10 * Self.mebibyte)
        let monitor = Self.monitor(host)
        let agent = try LineChild(["/bin/sleep", "60"])
        defer { agent.killIfRunning() }
        try await withRunningMonitor(monitor) { iterator in
            #expect(try await next(&iterator).level == .warning)
            monitor.coordinate(cgroupPath: "/pod", agentPid: agent.pid, for: .seconds(60))
            monitor.noteAgentAsk(agentPid: agent.pid)
            let left = try await next(&iterator, within: .seconds(5))
            try await body(host, monitor, agent, left, &iterator)
        }
    }

    @Test func anAgentsLeaseTakesTheParentOutUntilTheAgentEnds() async throws {
        try await Self.withAnsweredLease { _, monitor, agent, left, iterator in
            #expect(left.level == .normal && left.source == .agentLease && left.snapshot.coordinatedCgroups == ["/pod"], "\(left.source)")
            #expect(left.snapshot.limit == nil, "no limit of its own: the system's memory is measured")
            #expect(monitor.coordinatedCgroups == ["/pod": agent.pid])
            agent.signal(SIGKILL)
            let back = try await next(&iterator, within: .seconds(5))
            #expect(back.level == .warning && back.source == .agentLease && back.snapshot.binding?.cgroupPath == "/pod")
            #expect(monitor.coordinatedCgroups.isEmpty)
        }
    }

    @Test func aLeaseNotRenewedRunsOut() async throws {
        let host = try SharedParentHost(parentLimit: 256 * Self.mebibyte)
        try host.setUsage(parent: 218 * Self.mebibyte, app: 10 * Self.mebibyte)
        let monitor = Self.monitor(host)
        try await withRunningMonitor(monitor) { iterator in
            #expect(try await next(&iterator).level == .warning)
            // An agent that lives on (this process) but stops renewing: a hung one. The level
            // steps down after the hold time (2 s), and the lease runs out after 3.
            monitor.coordinate(cgroupPath: "/pod", agentPid: getpid(), for: .seconds(3))
            monitor.noteAgentAsk(agentPid: getpid())
            #expect(try await next(&iterator, within: .seconds(5)).level == .normal)
            // The reading at the lease's end, or the poll due about then: either finds the parent.
            let back = try await next(&iterator, within: .seconds(5))
            #expect(back.level == .warning && [.agentLease, .poll, .usageSample].contains(back.source), "\(back.source)")
            #expect(back.snapshot.binding?.cgroupPath == "/pod" && back.snapshot.coordinatedCgroups.isEmpty)
        }
    }

    @Test func theCgroupsOwnLimitIsNeverLeased() throws {
        let host = try SharedParentHost(parentLimit: 256 * Self.mebibyte, ownLimit: 64 * Self.mebibyte)
        let leases = AgentLeases(policy: PressurePolicy())
        leases.grant(cgroupPath: "/pod/app", agentPid: getpid(), for: .seconds(60))
        let layout = CgroupLayout(mode: .v2, memory: host.cgroup, unified: host.cgroup)
        let snapshot = try SnapshotSampler(layout: layout, files: host.files, includesAncestors: true, leases: leases).sample()
        #expect(snapshot.binding?.cgroupPath == "/pod/app" && snapshot.coordinatedCgroups.isEmpty)
    }

    // Issue 36, item 8: every limit at its own marks.
    @Test func aLargerParentPastItsWarningMarkRaisesTheLevelWhileTheOwnLimitBinds() async throws {
        // Own limit 100 MiB at 50 % (50 MiB of headroom: it binds); the parent, 1 GiB shared with
        // siblings, at 85 % (154 MiB of headroom): past its warning mark.
        let host = try SharedParentHost(parentLimit: 1024 * Self.mebibyte, ownLimit: 100 * Self.mebibyte)
        try host.setUsage(parent: 870 * Self.mebibyte, app: 50 * Self.mebibyte)
        let monitor = Self.monitor(host)
        let first = try #require(monitor.latestEvent)
        #expect(first.snapshot.binding?.cgroupPath == "/pod/app", "the own limit has the least headroom and binds")
        #expect(first.level == .warning, "the parent is past its warning mark: \(first.snapshot.constraints)")
        #expect(abs(first.snapshot.levelRatio - 870.0 / 1024) < 1e-9)
        // The release is sized to bring the parent back under its recovery mark (70 %).
        let target = ReleaseTarget.make(for: first.snapshot, policy: PressurePolicy(), growthBytesPerSecond: 0, leadTime: .zero)
        let parentRecovery = Int((1024 * Double(Self.mebibyte) * 0.7).rounded(.down))
        #expect(abs(target.bytes - (Int(870 * Self.mebibyte) - parentRecovery)) <= 1, "\(target.bytes)")
    }

    // Issue 36, item 1: a leased parent keeps a backstop.
    @Test func aLeasedParentsCrossingLeftUnansweredCountsAgainWithinTheBound() async throws {
        let host = try SharedParentHost(parentLimit: 256 * Self.mebibyte)
        try host.setUsage(parent: 100 * Self.mebibyte, app: 10 * Self.mebibyte)
        let monitor = Self.monitor(host)
        let agent = try LineChild(["/bin/sleep", "60"])  // an agent that lives and renews, but never asks
        defer { agent.killIfRunning() }
        try await withRunningMonitor(monitor) { iterator in
            #expect(try await next(&iterator).level == .normal)
            monitor.coordinate(cgroupPath: "/pod", agentPid: agent.pid, for: .seconds(60))
            // Siblings take the parent past its warning mark: the monitor sees the crossing (it
            // still samples the parent), leaves it to the agent, then counts it again.
            let crossed = ContinuousClock.now
            try host.setUsage(parent: 218 * Self.mebibyte, app: 10 * Self.mebibyte)
            let raised = try await next(&iterator, within: .seconds(5))
            let after = ContinuousClock.now - crossed
            #expect(raised.snapshot.binding?.cgroupPath == "/pod" && raised.snapshot.coordinatedCgroups.isEmpty, "\(raised.snapshot.constraints)")
            #expect(monitor.coordinatedCgroups == ["/pod": agent.pid], "the lease holds: only the backstop counts the parent")
            // Left to the agent for the bound first (a lower bound: it holds on a busy machine too).
            #expect(after >= AgentLeases.answerBound - .milliseconds(50), "counted again after \(after), before the bound")
            #expect([.agentLease, .poll, .usageSample].contains(raised.source), "\(raised.source)")
        }
    }

    @Test func aLeasedParentAtItsCriticalMarkCountsAgainAtOnceEvenWhenAnswered() async throws {
        try await Self.withAnsweredLease { host, _, _, left, iterator in
            #expect(left.level == .normal, "answered: left to the agent")
            try host.setUsage(parent: 240 * Self.mebibyte, app: 10 * Self.mebibyte)  // 94 %
            let critical = try await next(&iterator, within: .seconds(5))
            #expect(critical.snapshot.binding?.cgroupPath == "/pod" && critical.snapshot.coordinatedCgroups.isEmpty)
        }
    }

    @Test func aContainersCgroupNamespaceRootWithALimitIsCounted() throws {
        // Inside a cgroup namespace the mount's root is the container's cgroup, and has memory.max.
        let host = try SharedParentHost(parentLimit: 256 * Self.mebibyte, mountRootLimit: 128 * Self.mebibyte)
        let constraints = try CgroupMemoryReader(location: host.cgroup, files: host.files).constraints()
        #expect(constraints.map(\.cgroupPath) == ["/pod", "/"])
        #expect(CgroupMemoryReader(location: host.cgroup, files: host.files).ancestorsHiddenByNamespace())
    }
}

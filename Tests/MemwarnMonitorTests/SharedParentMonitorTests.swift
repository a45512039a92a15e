import CgroupKit
import Foundation
import MemwarnRelease
import MemwarnSystem
import MemwarnTestFixtures
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

    /// An engine under a parent at 85 % of 256 MiB, leased to an "agent" (a real process of
    /// ours, whose end the engine sees through its pidfd) that has answered the crossing (its ask
    /// reached the service): `body` gets them once the level is back to normal, after the hold,
    /// on the engine's manual clock.
    static func withAnsweredLease(_ body: (SharedParentHost, DrivenEngine, LineChild, LevelEvent) throws -> Void) throws {
        let host = try SharedParentHost(parentLimit: 256 * Self.mebibyte)
        try host.setUsage(parent: 218 * Self.mebibyte, app: 10 * Self.mebibyte)
        let engine = try DrivenEngine(files: host.files)
        let agent = try LineChild(["/bin/sleep", "60"])
        defer { agent.killIfRunning() }
        try engine.start()
        #expect(engine.level == .warning)
        try engine.grantLease(cgroupPath: "/pod", agentPid: agent.pid, for: .seconds(60), asked: true)
        try engine.advance(until: { engine.level == .normal }, "the step down")
        try body(host, engine, agent, try #require(engine.events.last))
    }

    @Test func anAgentsLeaseTakesTheParentOutUntilTheAgentEnds() throws {
        try Self.withAnsweredLease { _, engine, agent, left in
            #expect(left.level == .normal && left.snapshot.coordinatedCgroups == ["/pod"], "\(left.source)")
            #expect(left.snapshot.limit == nil, "no limit of its own: the system's memory is measured")
            #expect(engine.leases.current().mapValues(\.agentPid) == ["/pod": agent.pid])
            agent.signal(SIGKILL)
            try engine.turn(until: { engine.level == .warning }, "the agent's end seen")
            let back = try #require(engine.events.last)
            #expect(back.source == .agentLease && back.snapshot.binding?.cgroupPath == "/pod")
            #expect(engine.leases.current().isEmpty)
        }
    }

    /// On the engine's manual clock: the level steps down at the hold's end (2 s), and the lease
    /// runs out at its own (3 s), to the millisecond the engine schedules.
    @Test func aLeaseNotRenewedRunsOut() throws {
        let host = try SharedParentHost(parentLimit: 256 * Self.mebibyte)
        try host.setUsage(parent: 218 * Self.mebibyte, app: 10 * Self.mebibyte)
        let engine = try DrivenEngine(files: host.files)
        try engine.start()
        #expect(engine.level == .warning)
        // An agent that lives on (this process) and has answered, but stops renewing: a hung one.
        let granted = engine.clock.now
        try engine.grantLease(cgroupPath: "/pod", agentPid: getpid(), for: .seconds(3), asked: true)
        let left = try #require(engine.readings.last)
        #expect(left.event.snapshot.coordinatedCgroups == ["/pod"] && left.event.level == .warning, "left to the agent; the level holds")
        try engine.advance(until: { engine.level == .normal }, "the step down")
        let held = engine.clock.now - granted
        #expect(held >= PressurePolicy().holdTime && held <= PressurePolicy().holdTime + .milliseconds(5), "at the hold's end: \(held)")
        try engine.advance(until: { engine.level == .warning }, "the lease's end")
        let back = try #require(engine.events.last)
        #expect(back.source == .agentLease, "the reading the engine scheduled at the lease's end: \(back.source)")
        #expect(back.snapshot.binding?.cgroupPath == "/pod" && back.snapshot.coordinatedCgroups.isEmpty)
        let after = engine.clock.now - granted
        #expect(after > .seconds(3) && after <= .seconds(3) + .milliseconds(5), "the lease ran out after \(after)")
    }

    @Test func theCgroupsOwnLimitIsNeverLeased() throws {
        let host = try SharedParentHost(parentLimit: 256 * Self.mebibyte, ownLimit: 64 * Self.mebibyte)
        let leases = AgentLeases(policy: PressurePolicy())
        leases.grant(cgroupPath: "/pod/app", agentPid: getpid(), for: .seconds(60))
        let layout = CgroupLayout(mode: .v2, memory: host.cgroup, unified: host.cgroup)
        let snapshot = try SnapshotSampler(layout: layout, files: host.files, includesAncestors: true, leases: leases).sample()
        #expect(snapshot.binding?.cgroupPath == "/pod/app" && snapshot.coordinatedCgroups.isEmpty)
    }

    // Every limit is judged at its own marks.
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

    // A leased parent keeps a backstop.
    /// On the engine's manual clock: the crossing is left to the agent for exactly the bound.
    @Test func aLeasedParentsCrossingLeftUnansweredCountsAgainWithinTheBound() throws {
        let host = try SharedParentHost(parentLimit: 256 * Self.mebibyte)
        try host.setUsage(parent: 100 * Self.mebibyte, app: 10 * Self.mebibyte)
        let engine = try DrivenEngine(files: host.files)
        try engine.start()
        #expect(engine.level == .normal)
        // An agent that lives (this process) and renews, but never asks.
        try engine.grantLease(cgroupPath: "/pod", agentPid: getpid(), for: .seconds(60))
        // Siblings take the parent past its warning mark: the monitor sees the crossing (it still
        // samples the parent), leaves it to the agent, then counts it again.
        let before = engine.readings.count
        try host.setUsage(parent: 218 * Self.mebibyte, app: 10 * Self.mebibyte)
        try engine.advance(until: { engine.level == .warning }, step: .milliseconds(1), "the parent counted again")
        let readings = engine.readings[before...]
        let seen = try #require(
            readings.first { reading in
                reading.event.snapshot.constraintsWithCoordinated.contains { constraint in
                    constraint.cgroupPath == "/pod" && constraint.usageBytes == 218 * Self.mebibyte
                }
            })
        #expect(seen.event.level == .normal && seen.event.snapshot.coordinatedCgroups == ["/pod"], "the crossing, left to the agent")
        let raised = try #require(readings.last)
        #expect(raised.event.snapshot.binding?.cgroupPath == "/pod" && raised.event.snapshot.coordinatedCgroups.isEmpty, "\(raised.event.snapshot.constraints)")
        #expect(raised.event.source == .agentLease, "the backstop's own reading: \(raised.event.source)")
        let after = raised.readAt - seen.readAt
        #expect(after >= AgentLeases.answerBound && after <= AgentLeases.answerBound + .milliseconds(2), "counted again \(after) after the crossing")
        #expect(engine.leases.current().keys.sorted() == ["/pod"], "the lease holds: only the backstop counts the parent")
    }

    @Test func aLeasedParentAtItsCriticalMarkCountsAgainAtOnceEvenWhenAnswered() throws {
        try Self.withAnsweredLease { host, engine, _, left in
            #expect(left.level == .normal, "answered: left to the agent")
            try host.setUsage(parent: 240 * Self.mebibyte, app: 10 * Self.mebibyte)  // 94 %
            try engine.advance(until: { engine.level == .critical }, step: .milliseconds(1), "critical")
            let critical = try #require(engine.events.last)
            #expect(critical.snapshot.binding?.cgroupPath == "/pod" && critical.snapshot.coordinatedCgroups.isEmpty)
            #expect(critical.source == .usageSample, "at once, by the sample that saw it: \(critical.source)")
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

import CgroupKit
import Configuration
import Foundation
import Logging
import MemwarnConfiguration
import MemwarnSystem
import MemwarnTestFixtures
import MemwarnTestKit
import MemwarnTestTraits
import ServiceLifecycle
import ServiceLifecycleTestKit
import SystemPackage
import Testing

@testable import MemwarnMonitor

/// The policy from apple/swift-configuration: one `ConfigReader` over the
/// environment and a file gives memwarn its policy under the `memwarn` prefix, with the names,
/// values and errors of `Config/memwarn.conf`; a reloading file changed while the monitor runs
/// moves its marks, and a bad change is refused with the running policy kept.
@Suite struct PolicyFromConfigurationTests {
    /// A JSON file in a fresh private folder, removed with it.
    final class JSONFile: Sendable {
        let directory: String
        var path: String { directory + "/service.json" }

        init(_ json: String) throws {
            directory = try PrivateDirectory.makeTemporary(prefix: "memwarn-config")
            try write(json)
        }

        /// Replaces the file's content at once (a rename: a reader never sees half a file).
        func write(_ json: String) throws {
            try Data(json.utf8).write(to: URL(fileURLWithPath: path), options: .atomic)
        }

        deinit { try? FileManager.default.removeItem(atPath: directory) }
    }

    @Test func theEnvironmentAndAFileGiveThePolicyUnderMemwarnsPrefix() async throws {
        let file = try JSONFile(
            #"{"memwarn": {"warning_ratio": 0.6, "critical_ratio": 0.95, "recovery_ratio": 0.5, "growth_window": "20s", "worst_case_growth": "512M/s"}, "port": 8080}"#
        )
        let config = ConfigReader(providers: [
            EnvironmentVariablesProvider(environmentVariables: ["MEMWARN_WARNING_RATIO": "0.75", "MEMWARN_ANCESTOR_LIMITS": "ignore"]),
            try await FileProvider<JSONSnapshot>(filePath: FilePath(file.path)),
        ])
        let policy = try PressurePolicy(config: config.scoped(to: "memwarn"))
        #expect(policy.warningRatio == 0.75, "the first provider wins: the environment, as MEMWARN_WARNING_RATIO does today")
        #expect(policy.criticalRatio == 0.95 && policy.recoveryRatio == 0.5)
        #expect(policy.growthWindow == .seconds(20) && policy.worstCaseGrowthBytesPerSecond == 512 << 20)
        #expect(!policy.countsAncestorLimits)
        #expect(policy.holdTime == PressurePolicy().holdTime, "a key no provider has keeps its default")
        // The same settings as memwarn's own loader reads them from the same variables.
        let loaded = try PressurePolicy.load(environment: ["MEMWARN_WARNING_RATIO": "0.75", "MEMWARN_ANCESTOR_LIMITS": "ignore"])
        let fromEnvironment = try PressurePolicy(
            config: ConfigReader(
                provider: EnvironmentVariablesProvider(environmentVariables: ["MEMWARN_WARNING_RATIO": "0.75", "MEMWARN_ANCESTOR_LIMITS": "ignore"])
            ).scoped(to: "memwarn"))
        #expect(fromEnvironment == loaded)
    }

    @Test(arguments: [
        (#"{"memwarn": {"warning_ratio": "lots"}}"#, PolicyError.Code.badValue, #"configuration key warning_ratio: warning_ratio must be a number, is "lots""#),
        (#"{"memwarn": {"growth_window": 10}}"#, .badValue, "growth_window must be a duration such as 250ms or 2s"),
        (#"{"memwarn": {"warning_ratio": 0.95, "critical_ratio": 0.9}}"#, .inconsistent, "policy from the configuration: ratios must satisfy"),
    ])
    func aBadValueIsAPolicyErrorNamingItsKey(json: String, code: PolicyError.Code, message: String) async throws {
        let file = try JSONFile(json)
        let config = ConfigReader(provider: try await FileProvider<JSONSnapshot>(filePath: FilePath(file.path)))
        #expect {
            try PressurePolicy(config: config.scoped(to: "memwarn"))
        } throws: { error in
            guard let error = error as? PolicyError else { return false }
            return error.code == code && error.message.contains(message)
        }
    }

    /// A monitor (not run yet) with its policy from `config`, on a fresh v1 cgroup of `limit` whose
    /// usage a hog holds at 60 %: under the default warning mark, over a lowered one.
    static func withMonitorAtSixtyPercent(of limit: UInt64, policyFrom config: ConfigReader, _ body: (PressureMonitor) async throws -> Void) async throws {
        try await withTestCgroup(limit: limit) { cgroup in
            let hog = try MemoryHog(in: cgroup)
            defer { hog.terminate() }
            try await hog.hold(0.6, of: Int(limit))
            var configuration = MonitorConfiguration(policy: try PressurePolicy(config: config), cgroupPath: cgroup.location.directory, environment: [:])
            configuration.watchesPressureStall = false
            try await body(PressureMonitor(configuration: configuration, logger: testLogger))
        }
    }

    /// A real monitor on a real cgroup, its policy followed from a reloading JSON file.
    @Test(.tags(.root, .cgroupV1), .needsRealCgroups, .timeLimit(.minutes(2)))
    func aReloadedFileMovesTheRunningMonitorsMarksAndABadOneIsRefused() async throws {
        let limit: UInt64 = 64 << 20
        let file = try JSONFile(#"{"memwarn": {"warning_ratio": 0.8}}"#)
        let provider = try await ReloadingFileProvider<JSONSnapshot>(filePath: FilePath(file.path), pollInterval: .milliseconds(50))
        let reloading = Task { try await provider.run() }
        defer { reloading.cancel() }
        let config = ConfigReader(provider: provider).scoped(to: "memwarn")
        try await Self.withMonitorAtSixtyPercent(of: limit, policyFrom: config) { monitor in
            let refused = Locked<[String]>([])
            try await withRunningMonitor(monitor) { iterator in
                #expect(await iterator.next()?.level == .normal, "60 % of the limit, under the 80 % mark")
                let following = Task { try await monitor.followPolicy(from: config) { error in refused.withLock { $0.append("\(error)") } } }
                defer { following.cancel() }
                try await waitForUsageThresholds(monitor)
                // The marks move under the usage: 60 % is past the new warning mark.
                try file.write(#"{"memwarn": {"warning_ratio": 0.5, "recovery_ratio": 0.4}}"#)
                let warned = try #require(await iterator.next())
                #expect(warned.level == .warning && warned.previous == .normal && warned.source == .policyChange, "\(warned)")
                #expect(monitor.configuration.policy.warningRatio == 0.5)
                // Planned again: the new recovery mark's threshold (40 %) is registered.
                let recoveryMark = UInt64(Double(limit) * 0.4)
                try await waitUntil(within: .seconds(10), "the 40 % threshold") {
                    monitor.usageWatch == .thresholds && monitor.watchedSources.contains { $0.contains("usage-threshold \(recoveryMark)") }
                }
                // A change that makes no valid policy is refused: the running one is kept.
                try file.write(#"{"memwarn": {"warning_ratio": 1.5, "recovery_ratio": 0.4}}"#)
                try await waitUntil(within: .seconds(10), "the refusal") { !refused.withLock { $0.isEmpty } }
                #expect(refused.withLock { $0 }.first?.contains("ratios must satisfy") == true, "\(refused.withLock { $0 })")
                #expect(monitor.configuration.policy.warningRatio == 0.5 && monitor.level == .warning)
                // And the next good one applies: the marks back above the usage, the level steps down
                // after its hold time.
                try file.write(#"{"memwarn": {"warning_ratio": 0.8}}"#)
                let recovered = try #require(await iterator.next())
                #expect(recovered.level == .normal && monitor.configuration.policy.warningRatio == 0.8, "\(recovered)")
            }
        }
    }

    /// In a `ServiceGroup` as the article shows it: the monitor, and `PolicyFollower` over a
    /// provider whose values change. A change that leaves the level where it is says nothing;
    /// one that moves it is one event; the follower ends at graceful shutdown.
    @Test(.tags(.root, .cgroupV1), .needsRealCgroups, .timeLimit(.minutes(2)))
    func inAServiceGroupThePolicyFollowsItsProviderAndEndsAtGracefulShutdown() async throws {
        let limit: UInt64 = 64 << 20
        let provider = MutableInMemoryProvider(initialValues: ["memwarn.warning_ratio": 0.8])
        let config = ConfigReader(provider: provider).scoped(to: "memwarn")
        try await Self.withMonitorAtSixtyPercent(of: limit, policyFrom: config) { monitor in
            let seen = Locked<[LevelEvent]>([])
            monitor.addObserver { event in seen.withLock { $0.append(event) } }
            try await testGracefulShutdown { shutdown in
                let group = ServiceGroup(services: [monitor, PolicyFollower(monitor: monitor, config: config)], logger: testLogger)
                let running = Task { try await group.run() }
                try await waitUntil(within: .seconds(10), "the first reading") { seen.withLock { !$0.isEmpty } }
                // 75 %: a mark moved, still above the usage: no event, the policy applied all the same.
                provider.setValue(0.75, forKey: "memwarn.warning_ratio")
                try await waitUntil(within: .seconds(10), "the 75 % policy") { monitor.configuration.policy.warningRatio == 0.75 }
                #expect(seen.withLock { $0.count } == 1 && monitor.level == .normal, "\(seen.withLock { $0 })")
                // Under the usage: one event, from the policy.
                provider.setValue(0.4, forKey: "memwarn.recovery_ratio")
                provider.setValue(0.5, forKey: "memwarn.warning_ratio")
                try await waitUntil(within: .seconds(10), "the warning") { monitor.level == .warning }
                let raised = seen.withLock { $0 }.filter { $0.level == .warning }
                #expect(raised.count == 1 && raised.first?.source == .policyChange, "\(seen.withLock { $0 })")
                shutdown.triggerGracefulShutdown()
                try await running.value
            }
        }
    }

    /// `apply(policy:)` on a monitor that is not armed (turned off here): the policy is taken for
    /// its next run; an inconsistent one is refused and the running one kept.
    @Test func aPolicyAppliedToAMonitorNotArmedIsKeptForItsRunAndABadOneIsRefused() throws {
        let monitor = PressureMonitor(
            configuration: .init(cgroupPath: "/no/such/cgroup", environment: [MonitorConfiguration.disableVariable: "1"]), logger: testLogger)
        var policy = PressurePolicy()
        policy.warningRatio = 0.75
        try monitor.apply(policy: policy)
        #expect(monitor.configuration.policy.warningRatio == 0.75 && monitor.arming == nil)
        var bad = policy
        bad.recoveryRatio = 0.9
        #expect(throws: PolicyError.self) { try monitor.apply(policy: bad) }
        #expect(monitor.configuration.policy == policy, "the running policy is kept")
    }
}

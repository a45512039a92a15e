package import CgroupKit
package import Logging
package import MemwarnSystem
import Metrics

/// A shared limit watched by the monitor's own engine, for a node agent (`memwarn agent`): a
/// parent cgroup's own limit (a slice's, a pod's, `kubepods.slice`), the node's floor on
/// `MemAvailable`, or both. The sources, the adaptive sampling and guard bands, the level
/// machine with its hysteresis and hold, the transient retry and the clock are a service's
/// monitor's; the decided readings go to the agent's rounds instead of a release loop.
///
/// What is watched: the parent's usage against its own limit (not its ancestors': those are each
/// service's to watch), with the kernel's events where the host has them (v1 usage thresholds
/// as root, v2 `memory.events`), its limit files, and the node's used memory against `MemTotal`
/// less the floor. PSI does not count (a level from stalls has no size to ask for) and systemd's
/// pressure watch is not read (it is the agent's own unit's, not the parent's). A parent without
/// a limit of its own, and no floor, is an error: the agent never guards the whole machine by
/// default.
package struct SharedLimitWatch {
    /// What is watched, and how.
    package struct Configuration: Sendable {
        /// The marks and the sampling bounds.
        package var policy: PressurePolicy
        /// The parent cgroup, or `nil` to watch the node's floor alone.
        package var parent: CgroupLocation?
        /// The `MemAvailable` the node keeps, or `nil` for no floor.
        package var nodeFloorBytes: UInt64?
        /// Where the kernel's files are read.
        package var files: KernelFiles = .host
        /// The loop's clock (a manual one in tests).
        package var clock: LoopClock = .continuous

        /// A configuration.
        package init(policy: PressurePolicy, parent: CgroupLocation?, nodeFloorBytes: UInt64?) {
            self.policy = policy
            self.parent = parent
            self.nodeFloorBytes = nodeFloorBytes
        }
    }

    /// What every reading is taken with: the rounds measure with it too.
    package let sampler: SnapshotSampler
    /// What asks gave back: the rounds write it, the growth estimate adds it back.
    package let ledger: ReleaseLedger
    /// The engine, on its loop.
    package let engine: MonitorEngine

    /// Makes the engine on a new loop; ``EngineThread/start(_:name:whenEnded:)`` (or a test's
    /// driven loop) starts it.
    ///
    /// - Parameters:
    ///   - configuration: what is watched.
    ///   - logger: told of fallbacks and transient errors.
    ///   - output: told of level changes, readings and what is watched.
    ///   - consumer: makes what takes every decided reading (the agent's rounds), given the
    ///     sampler the readings are taken with and the ledger of what asks gave back.
    /// - Throws: ``MonitorError`` when the loop cannot be made.
    package init(
        _ configuration: Configuration, logger: Logger, output: any MonitorEngineOutput,
        consumer: (SnapshotSampler, ReleaseLedger) -> any MonitorReadingConsumer
    ) throws(MonitorError) {
        let loop: EventLoop
        do {
            loop = try EventLoop(clock: configuration.clock)
        } catch {
            throw MonitorError(error)
        }
        var monitorConfiguration = MonitorConfiguration(policy: configuration.policy, environment: [:])
        monitorConfiguration.files = configuration.files
        monitorConfiguration.watchesPressureStall = false
        let mode: CgroupMode = configuration.parent?.version == .v2 ? .v2 : .v1
        sampler = SnapshotSampler(
            layout: CgroupLayout(mode: mode, memory: configuration.parent, unified: nil), files: configuration.files, includesAncestors: false,
            countsInactivePageCache: configuration.policy.countsInactivePageCache,
            leases: nil, nodeFloorBytes: configuration.nodeFloorBytes, requiresLimit: true)
        ledger = ReleaseLedger()
        let metrics = MonitorMetrics(factory: NOOPMetricsHandler.instance)  // the agent writes its own
        engine = MonitorEngine(
            loop: loop, sampler: sampler, configuration: monitorConfiguration, logger: logger, ledger: ledger,
            samples: UsageSampleCount(metrics: metrics), output: output, consumer: consumer(sampler, ledger))
    }

    /// Starts the engine on a thread of its own and returns once it has registered its sources
    /// and taken its first reading.
    ///
    /// - Parameter whenEnded: called on the engine's thread once it has ended.
    /// - Throws: CgroupKit's `CgroupError` when the parent cannot be read or has no limit (and
    ///   there is no floor); ``MonitorError`` when a thread or a source cannot be made.
    package func start(whenEnded: @escaping @Sendable () -> Void) throws -> EngineThread {
        try EngineThread.start(engine, name: "memwarn-agent-watch", whenEnded: whenEnded)
    }
}

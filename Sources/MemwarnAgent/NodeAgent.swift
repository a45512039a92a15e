package import CgroupKit
import Logging
import MemwarnControl
import MemwarnMonitor
import MemwarnSystem
import ServiceLifecycle

/// The node agent (`memwarn agent`): one per node or per parent cgroup. It finds the memwarn
/// services below the parent, takes the parent's pressure off their own monitors (a lease each),
/// watches the parent with the monitor's own engine, and when the parent's level asks for a
/// release asks the services to release — the largest first by kernel-measured usage, one at a
/// time, the parent measured after each — until the parent is back under its recovery mark.
///
/// One watcher: the parent is watched by the same engine as a service's own limit
/// (``/MemwarnMonitor/SharedLimitWatch``): its kernel events, adaptive sampling and guard bands, the
/// level machine with its hysteresis and hold, the transient retry. Two threads: the engine's,
/// which waits on nothing but the kernel, and the agent's loop, where services are found, leased
/// and asked (``ServiceRoster``, ``AgentRounds``), every exchange a readiness event with its own
/// deadline and its own bounded buffer: no socket can hold up a crossing, a renewal or another
/// service's ask.
///
/// Never worse than no agent: each leased service keeps a backstop (its monitor counts the parent
/// again at the critical mark, or when the agent leaves a crossing unanswered for a second:
/// MemwarnMonitor's `AgentLeases`), an agent that dies stops renewing its leases, and asks are
/// paced (``AskPacing``): a few a second per service at most, fewer while they free little, none
/// while no service has anything to give.
package final class NodeAgent: Service {
    private let configuration: AgentConfiguration
    private let files: KernelFiles
    private let say: @Sendable (AgentRecord) -> Void
    private let sink: RecordSink
    private let metrics: AgentMetrics?

    /// An agent; ``run()`` starts it.
    ///
    /// - Parameters:
    ///   - configuration: what it watches and how it asks.
    ///   - files: where the kernel's files are read (fixture trees in tests).
    ///   - metricsFile: where its Prometheus metrics are written, or `nil`.
    ///   - emit: each record, one at a time, from either of its threads.
    package init(configuration: AgentConfiguration, files: KernelFiles = .host, metricsFile: String? = nil, emit: @escaping @Sendable (AgentRecord) -> Void) {
        self.configuration = configuration
        self.files = files
        sink = RecordSink(emit)
        say = { [sink] in sink.say($0) }
        metrics = metricsFile.map { [sink] in AgentMetrics(path: $0, say: { sink.say($0) }) }
    }

    /// Writes the metrics file once, before the agent starts: a path that cannot be written is
    /// the operator's mistake, said at once (later failures are reported once as they happen).
    ///
    /// - Throws: CgroupKit's `CgroupError` (`.unwritable`) naming the file and why.
    package func checkMetricsFile(_ path: String) throws(CgroupError) {
        do {
            try metrics?.write()
        } catch {
            throw CgroupError(.unwritable, "--metrics-file cannot be written: \(error)", path: path)
        }
    }

    /// Runs until graceful shutdown or cancellation, then ends every lease (the services count
    /// the parent's limit again at once) and returns.
    ///
    /// - Throws: CgroupKit's `CgroupError` when the parent cannot be read, has no limit of its own
    ///   and no floor is given, or is deleted while watched; ``/MemwarnMonitor/MonitorError`` when a
    ///   thread, a loop or a source cannot be made.
    package func run() async throws {
        let loop: EventLoop
        do {
            loop = try EventLoop()
        } catch {
            throw MonitorError(error)
        }
        let roster = ServiceRoster(configuration: configuration, files: files, loop: loop, metrics: metrics, say: say)
        var watchConfiguration = SharedLimitWatch.Configuration(
            policy: configuration.policy, parent: configuration.parent, nodeFloorBytes: configuration.minAvailableBytes)
        watchConfiguration.files = files
        let logger = Logger(label: "memwarn.agent", factory: { StreamLogHandler.standardError(label: $0) }).with(level: .warning)
        var made: AgentRounds?
        let watch = try SharedLimitWatch(watchConfiguration, logger: logger, output: AgentWatchOutput(say: say)) {
            [configuration, metrics, say] sampler, ledger in
            let rounds = AgentRounds(
                loop: loop, roster: roster, sampler: sampler, ledger: ledger, configuration: configuration, metrics: metrics, say: say)
            made = rounds
            return rounds
        }
        guard let agentRounds = made else { preconditionFailure("the watch makes its consumer as it is made") }
        roster.changed = { [unowned agentRounds] in agentRounds.servicesChanged() }
        try start(watch.sampler)

        // The agent's loop first (the engine's first reading is handed to it), then the engine.
        let loopEnded = ConditionLock(false)
        let confined = ThreadConfined((roster, agentRounds), on: loop)
        do {
            try SystemThread.start(name: "memwarn-agent") {
                do {
                    try loop.run { confined.value.0.start() }
                } catch {
                    // epoll_wait failed: the loop ended; the engine's end is what `run` reports.
                }
                loopEnded.withLock { $0 = true }
            }
        } catch {
            throw MonitorError(error)
        }
        let engine: EngineThread
        do {
            engine = try watch.start(whenEnded: {})
        } catch {
            stopLoop(loop, confined, ended: loopEnded)
            throw error
        }
        var failure: (any Error)?
        do {
            try await withTaskCancellationOrGracefulShutdownHandler {
                try await engine.ended()
            } onCancelOrGracefulShutdown: {
                engine.stop()
            }
        } catch {
            failure = error
        }
        engine.stopAndWait()
        stopLoop(loop, confined, ended: loopEnded)
        say(AgentRecord("stopped"))
        if let failure { throw failure }
    }

    /// Reads the parent once and says what is guarded (`started`), before anything starts: a
    /// parent without a limit of its own, and no floor, is the operator's mistake, said at once.
    private func start(_ sampler: SnapshotSampler) throws(CgroupError) {
        let first: PressureSnapshot
        do {
            first = try sampler.measure()
        } catch  where error.code == .unsupported {
            throw CgroupError(
                .unsupported,
                "the cgroup has no memory limit of its own and no --min-available was given: there is nothing to guard "
                    + "(a limit set above it is each service's to watch; give the agent that cgroup)",
                path: configuration.parent?.directory ?? "/proc/meminfo")
        }
        var started = AgentRecord("started")
        (started.measure, started.parentUsageBytes, started.parentLimitBytes) = (AgentRounds.describe(first), first.usageBytes, first.capacityBytes)
        say(started)
    }

    /// Ends every lease (bounded), stops asking, and stops the agent's loop; returns once it ended.
    private func stopLoop(_ loop: EventLoop, _ confined: ThreadConfined<(ServiceRoster, AgentRounds)>, ended: ConditionLock<Bool>) {
        loop.execute {
            let (roster, rounds) = confined.value
            rounds.stop()
            roster.endLeases(within: .milliseconds(500)) { loop.stop() }
        }
        _ = ended.wait(timeout: nil) { $0 ? true : nil }
    }
}

extension Logger {
    /// This logger at `level`.
    fileprivate func with(level: Logger.Level) -> Logger {
        var logger = self
        logger.logLevel = level
        return logger
    }
}

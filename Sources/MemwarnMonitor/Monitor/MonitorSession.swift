import CgroupKit
import Logging
import MemwarnRelease
import MemwarnSystem

/// One armed run of a monitor: its loop thread (the engine: sources, readings, levels) and its
/// release thread, from arming until stopped.
///
/// ``arm(_:)`` blocks its caller until the engine has registered every source and taken the
/// first reading (or failed to), so that whatever the caller starts next is already watched.
final class MonitorSession: Sendable {
    /// What a session is made from.
    struct Parts: Sendable {
        var configuration: MonitorConfiguration
        var logger: Logger
        var metrics: MonitorMetrics
        /// Where the engine counts its cheap reads of usage.
        var samples: UsageSampleCount
        /// The monitor's side of the engine (events, readings, sources, transient errors).
        var output: @Sendable () -> any MonitorEngineOutput
        /// The coordinators attached to the monitor, which the release loop reads.
        var coordinators: AttachedCoordinators
        /// The exhausted state changed.
        var exhaustionChanged: @Sendable (MemoryExhaustion) -> Void
        /// The ancestors a node agent coordinates for the monitor.
        var leases: AgentLeases
        /// The level of the session this one replaces, when a policy is applied while running.
        var carriedLevel: MemoryPressureLevel? = nil
    }

    private let thread: EngineThread
    private let releaseLoop: ReleaseLoop
    /// How arming went.
    let arming: MonitorArming
    /// The sampler every reading of the session goes through (its `readCount`).
    let sampler: SnapshotSampler
    private let releaseEnded: AsyncStream<Void>

    private init(thread: EngineThread, releaseLoop: ReleaseLoop, arming: MonitorArming, sampler: SnapshotSampler, releaseEnded: AsyncStream<Void>) {
        self.thread = thread
        self.releaseLoop = releaseLoop
        self.arming = arming
        self.sampler = sampler
        self.releaseEnded = releaseEnded
    }

    /// Finds the cgroup, starts the release thread and the engine's thread, and returns once
    /// every source is registered and the first reading taken.
    ///
    /// - Throws: ``PolicyError`` for an inconsistent policy; CgroupKit's `CgroupError` when the
    ///   cgroup cannot be found or read; ``MonitorError`` when the system refuses a thread, an
    ///   epoll instance or an eventfd.
    static func arm(_ parts: Parts) throws -> MonitorSession {
        let began = ContinuousClock.now
        let configuration = parts.configuration
        try configuration.policy.validate()
        let discovery = CgroupDiscovery(files: configuration.files)
        let layout = try configuration.cgroupPath.map { (path) throws(CgroupError) in try discovery.layout(cgroupPath: path) } ?? discovery.layout()
        for note in layout.notes { parts.logger.notice("\(note)") }

        let loop: EventLoop
        do {
            loop = try EventLoop()
        } catch {
            throw MonitorError(error)
        }
        let sampler = SnapshotSampler(
            layout: layout, files: configuration.files, includesAncestors: configuration.policy.countsAncestorLimits,
            countsInactivePageCache: configuration.policy.countsInactivePageCache,
            leases: parts.leases)
        let ledger = ReleaseLedger()
        let readingAsk = ReadingAsk(loop: loop)
        let releaseLoop = ReleaseLoop(
            context: .init(
                sampler: sampler, policy: configuration.policy, clock: loop.clock, ledger: ledger,
                metrics: parts.metrics, logger: parts.logger, coordinators: parts.coordinators, exhaustionChanged: parts.exhaustionChanged,
                askForReading: { readingAsk.ask() }))
        // The release thread lives as long as the engine's: started first, ended after it.
        let (releaseEnded, endRelease) = AsyncStream.makeStream(of: Void.self)
        do {
            try releaseLoop.start { endRelease.finish() }
        } catch {
            throw MonitorError(error)
        }
        let engine = MonitorEngine(
            loop: loop, sampler: sampler, configuration: configuration, logger: parts.logger,
            ledger: ledger, samples: parts.samples, output: parts.output(), consumer: releaseLoop,
            carriedLevel: parts.carriedLevel)
        readingAsk.connect(engine)
        // The release thread ends with the engine, whoever stopped it (a run's end, the monitor
        // released unrun, a failed source), after the release under way.
        let thread = try EngineThread.start(engine, name: "memwarn-monitor") { releaseLoop.stop() }
        let arming = MonitorArming(
            duration: ContinuousClock.now - began, sinceProcessStart: ProcessAge.now(files: configuration.files),
            usageWatch: thread.start.usageWatch, pendingThresholds: thread.start.pendingThresholds, sources: [])
        return MonitorSession(thread: thread, releaseLoop: releaseLoop, arming: arming, sampler: sampler, releaseEnded: releaseEnded)
    }

    /// Runs `work` on the engine's thread (any thread may ask); never, once the engine stopped.
    func onLoop(_ work: @escaping @Sendable () -> Void) {
        thread.onEngine { _ in work() }
    }

    /// Tells the engine a lease was granted or renewed (any thread).
    func leaseGranted(isNew: Bool, agentPid: Int32) {
        thread.onEngine { $0.leaseGranted(isNew: isNew, agentPid: agentPid) }
    }

    /// Tells the engine a lease ended at the agent's word (any thread).
    func leaseRevoked() {
        thread.onEngine { $0.leaseRevoked() }
    }

    /// Asks the engine to stop (any thread); ``waitUntilEnded()`` returns once it has. Asking a
    /// stopped engine does nothing (the loop drops work handed to it after it ended).
    func stop() {
        thread.stop()
    }

    /// Stops the engine and blocks until its thread has torn every source down (the cgroup can
    /// then be removed without the monitor reading it gone).
    func stopAndWait() {
        thread.stopAndWait()
    }

    /// Waits until the engine has ended (stopped, or failed for good) and the release thread with
    /// it, after the release under way.
    ///
    /// - Throws: what ended the engine: CgroupKit's `CgroupError` for a cgroup deleted while
    ///   watched, ``MonitorError`` when `epoll_wait` failed.
    func waitUntilEnded() async throws {
        // In a task of its own, which a cancelled run does not cancel: in a cancelled task an
        // AsyncStream's iteration ends at once, and the run would return while the engine still
        // tears its sources down and the release thread finishes its release (and lifts the
        // trim's ceilings). Both end soon once stopped.
        let (thread, releaseEnded) = (thread, releaseEnded)
        try await Task {
            var failure: (any Error)?
            do {
                try await thread.ended()
            } catch {
                failure = error
            }
            for await _ in releaseEnded {}
            if let failure { throw failure }
        }.value
    }
}

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

    private let loop: EventLoop
    private let engine: ThreadConfined<MonitorEngine>
    private let releaseLoop: ReleaseLoop
    /// How arming went.
    let arming: MonitorArming
    /// The sampler every reading of the session goes through (its ``SnapshotSampler/readCount``).
    let sampler: SnapshotSampler
    /// The engine's end: its failure, or success after a stop.
    private let engineEnded: AsyncStream<Result<Void, any Error>>
    private let releaseEnded: AsyncStream<Void>
    /// Set by the engine's thread as it ends.
    private let threadEnded: ConditionLock<Bool>

    private init(
        loop: EventLoop, engine: ThreadConfined<MonitorEngine>, releaseLoop: ReleaseLoop, arming: MonitorArming, sampler: SnapshotSampler,
        engineEnded: AsyncStream<Result<Void, any Error>>, releaseEnded: AsyncStream<Void>, threadEnded: ConditionLock<Bool>
    ) {
        self.loop = loop
        self.engine = engine
        self.releaseLoop = releaseLoop
        self.arming = arming
        self.sampler = sampler
        self.engineEnded = engineEnded
        self.releaseEnded = releaseEnded
        self.threadEnded = threadEnded
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
        let madeEngine = MonitorEngine(
            loop: loop, sampler: sampler, configuration: configuration, logger: parts.logger,
            ledger: ledger, samples: parts.samples, output: parts.output(), releaseLoop: releaseLoop,
            carriedLevel: parts.carriedLevel)
        readingAsk.connect(madeEngine)
        let engine = ThreadConfined(madeEngine, on: loop)
        let (engineEnded, endEngine) = AsyncStream.makeStream(of: Result<Void, any Error>.self, bufferingPolicy: .bufferingNewest(1))
        let armed = ConditionLock<Result<(watch: MonitorArming.UsageWatch, pendingThresholds: Int), any Error>?>(nil)
        let threadEnded = ConditionLock(false)
        do throws(SystemError) {
            try SystemThread.start(name: "memwarn-monitor") {
                var outcome: Result<Void, any Error> = .success(())
                do {
                    try loop.run {  // the engine is read on the loop's thread from here on
                        do {
                            try engine.value.start()
                        } catch let error as SystemError {
                            throw MonitorError(error)
                        }
                        armed.withLock { $0 = .success((engine.value.usageWatch, engine.value.pendingThresholds)) }
                    }
                } catch {
                    outcome = .failure(error)
                }
                engine.value.tearDown()
                if case .success = outcome, let failure = engine.value.failure { outcome = .failure(failure) }
                armed.withLock { state in
                    if state == nil, case .failure(let error) = outcome { state = .failure(error) }
                }
                // The release thread ends with the engine, whoever stopped it (a run's end, the
                // monitor released unrun, a failed source), after the release under way.
                releaseLoop.stop()
                endEngine.yield(outcome)
                endEngine.finish()
                threadEnded.withLock { $0 = true }
            }
        } catch {
            releaseLoop.stop()
            throw MonitorError(error)
        }
        let usageWatch: MonitorArming.UsageWatch
        let pendingThresholds: Int
        switch armed.wait(timeout: nil, until: { $0 }) {
        case .success(let started)?:
            (usageWatch, pendingThresholds) = started
        case .failure(let error)?:
            releaseLoop.stop()
            throw error
        case nil:
            preconditionFailure("an untimed wait returned nothing")
        }
        let duration = ContinuousClock.now - began
        let arming = MonitorArming(
            duration: duration, sinceProcessStart: ProcessAge.now(files: configuration.files),
            usageWatch: usageWatch, pendingThresholds: pendingThresholds, sources: [])
        return MonitorSession(
            loop: loop, engine: engine, releaseLoop: releaseLoop, arming: arming, sampler: sampler, engineEnded: engineEnded,
            releaseEnded: releaseEnded, threadEnded: threadEnded)
    }

    /// Runs `work` on the engine's thread (any thread may ask); never, once the engine stopped.
    func onLoop(_ work: @escaping @Sendable () -> Void) {
        loop.execute(work)
    }

    /// Tells the engine a lease was granted or renewed (any thread).
    func leaseGranted(isNew: Bool, agentPid: Int32) {
        loop.execute { [engine] in engine.value.leaseGranted(isNew: isNew, agentPid: agentPid) }
    }

    /// Tells the engine a lease ended at the agent's word (any thread).
    func leaseRevoked() {
        loop.execute { [engine] in engine.value.leaseRevoked() }
    }

    /// Asks the engine to stop (any thread); ``waitUntilEnded()`` returns once it has. Asking a
    /// stopped engine does nothing (the loop drops work handed to it after it ended).
    func stop() {
        loop.execute { [weak loop] in loop?.stop() }
    }

    /// Stops the engine and blocks until its thread has torn every source down (the cgroup can
    /// then be removed without the monitor reading it gone).
    func stopAndWait() {
        stop()
        _ = threadEnded.wait(timeout: nil) { $0 ? true : nil }
    }

    /// Waits until the engine has ended (stopped, or failed for good) and the release thread with
    /// it, after the release under way.
    ///
    /// - Throws: what ended the engine: CgroupKit's `CgroupError` for a cgroup deleted while
    ///   watched, ``MonitorError`` when `epoll_wait` failed.
    func waitUntilEnded() async throws {
        var outcome: Result<Void, any Error> = .success(())
        for await ended in engineEnded { outcome = ended }
        for await _ in releaseEnded {}
        try outcome.get()
    }
}

import CgroupKit
import MemwarnSystem
import MemwarnTestFixtures
import MemwarnTestKit
import Metrics

@testable import MemwarnMonitor
@testable import MemwarnRelease

/// A monitor's engine and its release loop turned on the test's own thread, on a manual clock:
/// what the engine's deadlines do (sampling intervals, the hold before a step down, lease ends,
/// the transient retry's waits, the release loop's ask for a reading) is tested by moving the
/// clock, synchronously — no thread, no sleep (the level's recheck is stepped as a value, in
/// `LevelMachineTests`). The
/// kernel's files are real files (a synthetic host's, or a real cgroup's), and so are the
/// descriptors the sources watch (inotify, eventfds): a turn finds what they report. Every call
/// turns the loop first, which makes the calling thread the loop's: a test's task may move
/// between threads at each `await`.
final class DrivenEngine {
    let clock = ManualClock()
    let loop: EventLoop
    let sampler: SnapshotSampler
    let leases: AgentLeases
    let coordinators = AttachedCoordinators()
    private let output = RecordedOutput()
    private let engine: MonitorEngine
    private let releaseLoop: ReleaseLoop
    private let metrics = MonitorMetrics(factory: MetricsSystem.factory)
    let samples: UsageSampleCount
    let decisions = SharedCount()

    /// An engine reading `files` (the process's own cgroup, or `cgroupPath`), PSI not counted.
    init(files: KernelFiles, policy: PressurePolicy = PressurePolicy(), cgroupPath: String? = nil) throws {
        loop = try EventLoop(clock: clock.clock)
        var configuration = MonitorConfiguration(policy: policy, cgroupPath: cgroupPath, environment: [:])
        configuration.files = files
        configuration.watchesPressureStall = false
        let discovery = CgroupDiscovery(files: files)
        let layout = try cgroupPath.map { try discovery.layout(cgroupPath: $0) } ?? discovery.layout()
        leases = AgentLeases(policy: policy, clock: clock.clock)
        sampler = SnapshotSampler(
            layout: layout, files: files, includesAncestors: policy.countsAncestorLimits, countsInactivePageCache: policy.countsInactivePageCache,
            leases: leases)
        samples = UsageSampleCount(metrics: metrics)
        let ledger = ReleaseLedger()
        let readingAsk = ReadingAsk(loop: loop)
        releaseLoop = ReleaseLoop(
            context: .init(
                sampler: sampler, policy: policy, clock: clock.clock, ledger: ledger, metrics: metrics, logger: testLogger,
                coordinators: coordinators, exhaustionChanged: { _ in }, askForReading: { readingAsk.ask() }))
        engine = MonitorEngine(
            loop: loop, sampler: sampler, configuration: configuration, logger: testLogger, ledger: ledger, samples: samples,
            decisions: decisions, output: output, consumer: releaseLoop)
        readingAsk.connect(engine)
    }

    deinit {
        try? loop.drive()
        engine.tearDown()
    }

    /// Registers the sources and takes the first reading, on the calling thread (the loop's from now on).
    func start() throws {
        try loop.drive()
        try engine.start()
        try turn()
    }

    /// Moves the clock on by `duration` and does what is due.
    func advance(by duration: Duration) throws {
        clock.advance(by: duration)
        try turn()
    }

    /// Does what is due now: what the descriptors report (a file written, a threshold crossed),
    /// the work other threads handed over, the deadlines due, and the release loop's reading.
    func turn() throws {
        try loop.drive()
        releaseLoop.handleWaitingReading()
    }

    /// Turns until `condition` holds, waiting (in real time, at most `limit`) for descriptors and
    /// other threads' work in between: a threshold registrar, a child's memory.
    func turn(until condition: () -> Bool, within limit: Duration = .seconds(10), _ what: String) throws {
        guard try loop.drive(until: condition, within: limit) else { throw ChildProcessError("\(what) within \(limit)") }
        releaseLoop.handleWaitingReading()
    }

    /// Moves the clock on in `step`s until `condition` holds, at most `limit` of the clock.
    ///
    /// - Returns: how far the clock moved.
    @discardableResult
    func advance(
        until condition: () -> Bool, step: Duration = .milliseconds(5), within limit: Duration = .seconds(10), _ what: String
    ) throws -> Duration {
        var moved = Duration.zero
        while !condition() {
            guard moved < limit else { throw ChildProcessError("\(what) within \(limit) of the clock") }
            try advance(by: step)
            moved += step
        }
        return moved
    }

    /// Takes a reading now, as a source's wake would, and only that: no turn (for a reading
    /// taken while a release runs, from inside a consumer, on the loop's thread).
    func read(source: PressureSignal) {
        engine.wake(hint: .readNow, source: source)
    }

    /// A node agent's lease granted or renewed, as the control endpoint grants it; `asked`: the
    /// agent has asked this service to release (its answer to a crossing).
    func grantLease(cgroupPath: String, agentPid: Int32, for duration: Duration, asked: Bool = false) throws {
        let isNew = leases.grant(cgroupPath: cgroupPath, agentPid: agentPid, for: duration)
        if asked { leases.noteAsk(agentPid: agentPid) }
        try loop.drive()  // the calling thread is the loop's
        engine.leaseGranted(isNew: isNew, agentPid: agentPid)
        try turn()
    }

    /// The events emitted so far (the first reading's, then every change).
    var events: [LevelEvent] { output.events }
    /// Every reading so far, decided.
    var readings: [MonitorReading] { output.readings }
    /// The level after the latest reading.
    var level: MemoryPressureLevel { output.readings.last?.event.level ?? .normal }
    /// What the engine listens to.
    var sources: [String] { output.sources }
    /// How usage changes reach it.
    var usageWatch: MonitorArming.UsageWatch { engine.usageWatch }
    /// Thresholds still being registered (cgroup v1 as root).
    var pendingThresholds: Int { engine.pendingThresholds }
    /// The failure that stopped it.
    var failure: CgroupError? { engine.failure }
    /// The transient errors noted, and `nil` for each episode's end.
    var transientNotes: [CgroupError?] { output.transientNotes }
}

/// What an engine tells its monitor, kept (for a test that looks, or one that only needs an output).
final class RecordedOutput: MonitorEngineOutput {
    var events: [LevelEvent] = []
    var readings: [MonitorReading] = []
    var sources: [String] = []
    var transientNotes: [CgroupError?] = []
    func engineEmitted(_ event: LevelEvent) { events.append(event) }
    func engineRead(_ reading: MonitorReading) { readings.append(reading) }
    func engineListens(to sources: [String]) { self.sources = sources }
    func engineWatchesUsage(by watch: MonitorArming.UsageWatch, after: Duration) {}
    func engineNoted(transientError: CgroupError?) { transientNotes.append(transientError) }
}

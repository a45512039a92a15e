import CgroupKit
import Logging
import MemwarnMonitor
import MemwarnSystem
import MemwarnTestFixtures
import MemwarnTestKit

@testable import MemwarnAgent

/// A node agent turned on the test's own thread, on a manual clock, as `DrivenEngine` turns a
/// monitor's engine: the engine watching the parent (``/MemwarnMonitor/SharedLimitWatch``) on one
/// driven loop, the roster and the rounds on another, both reading the same clock. What the
/// agent's deadlines do — sampling the parent, the hold, each service's refresh and renewal, the
/// pacing of asks — is tested by moving the clock. The kernel's files are a synthetic host's, and
/// the services are real control endpoints answering real sockets (in real time: a turn waits for
/// the exchanges under way to end).
final class DrivenAgent {
    let clock = ManualClock()
    let watch: SharedLimitWatch
    let agentLoop: EventLoop
    let roster: ServiceRoster
    private(set) var rounds: AgentRounds!
    let records = Locked<[AgentRecord]>([])

    init(files: KernelFiles, parent: CgroupLocation, controlDirectory: String, policy: PressurePolicy = PressurePolicy()) throws {
        agentLoop = try EventLoop(clock: clock.clock)
        let configuration = AgentConfiguration(parent: parent, minAvailableBytes: nil, controlDirectories: [controlDirectory], policy: policy)
        let say: @Sendable (AgentRecord) -> Void = { [records] record in records.withLock { $0.append(record) } }
        roster = ServiceRoster(configuration: configuration, files: files, loop: agentLoop, metrics: nil, say: say)
        var watchConfiguration = SharedLimitWatch.Configuration(policy: policy, parent: parent, nodeFloorBytes: nil)
        watchConfiguration.files = files
        watchConfiguration.clock = clock.clock
        var made: AgentRounds?
        watch = try SharedLimitWatch(watchConfiguration, logger: testLogger, output: AgentWatchOutput(say: say)) {
            [agentLoop, roster] sampler, ledger in
            let rounds = AgentRounds(
                loop: agentLoop, roster: roster, sampler: sampler, ledger: ledger, configuration: configuration, metrics: nil, say: say)
            made = rounds
            return rounds
        }
        rounds = made
        roster.changed = { [unowned self] in rounds.servicesChanged() }
    }

    deinit {
        try? agentLoop.drive()
        rounds.stop()
        try? watch.engine.loop.drive()
        watch.engine.tearDown()
    }

    /// Starts the engine (its first reading) and the roster (a search), on the calling thread.
    func start() throws {
        try watch.engine.loop.drive()
        try watch.engine.start()
        try agentLoop.drive()
        roster.start()
        try turn()
    }

    /// Does what is due on both loops, then waits (in real time, at most `limit`) until the
    /// exchanges under way have ended.
    func turn(within limit: Duration = .seconds(5)) throws {
        try watch.engine.loop.drive()
        try agentLoop.drive()
        guard try agentLoop.drive(until: { roster.exchangesUnderWay == 0 && rounds.asksUnderWay == 0 }, within: limit) else {
            throw ChildProcessError("exchanges still under way after \(limit)")
        }
        try watch.engine.loop.drive()
        try agentLoop.drive()
    }

    /// Moves the clock on by `duration` and does what is due.
    func advance(by duration: Duration) throws {
        clock.advance(by: duration)
        try turn()
    }

    /// Turns (waiting in real time for sockets) until `condition` holds.
    func turn(until condition: () -> Bool, within limit: Duration = .seconds(10), _ what: String) throws {
        let deadline = ContinuousClock.now + limit
        while !condition() {
            guard ContinuousClock.now < deadline else { throw ChildProcessError("\(what) within \(limit)") }
            try watch.engine.loop.drive()
            _ = try agentLoop.drive(until: condition, within: .milliseconds(10))
        }
    }

    /// The records of one kind so far.
    func records(_ event: String) -> [AgentRecord] { records.withLock { $0.filter { $0.event == event } } }
}

import CgroupKit
import MemwarnControl
import MemwarnMonitor
import MemwarnRelease
import MemwarnSystem

/// The agent's asks, on its loop: the parent's decided readings come from the monitor's engine
/// (``SharedLimitWatch``), as a service's come to its release loop, and a reading that asks for a
/// release (the level machine's `releaseLevel`: a rise, or usage at the warning mark while the
/// level is raised) starts asking the services — the largest first by kernel-measured usage,
/// one at a time, each for what brings the parent under its recovery mark with room for the
/// growth expected before it can be asked again (`ReleaseTarget`, as a service
/// sizes its own), the parent measured again after each answer — until the parent is under its
/// recovery mark. Whom to ask, and when, is ``AskPacing``'s: only services with something to
/// give, a few asks a second at most, less often while asks free little.
///
/// A service slow to answer costs nothing but its own slot: after
/// ``AgentConfiguration/askPatience`` the next service is asked beside it (at most
/// ``maximumAsksUnderWay`` at once), and its answer is counted when it comes.
///
/// A press, from a reading that asks for a release to the parent back under its recovery mark,
/// is said as `crossing` and `relieved`.
final class AgentRounds: MonitorReadingConsumer, @unchecked Sendable {
    // @unchecked: `offer` only hands the reading to the loop (its inbox is locked); everything
    // else is touched on the agent's loop thread only.

    /// The most asks under way at once (a slow one, and those asked beside it).
    static let maximumAsksUnderWay = 4

    private let loop: EventLoop
    private let roster: ServiceRoster
    private let sampler: SnapshotSampler
    private let ledger: ReleaseLedger
    private let configuration: AgentConfiguration
    private let say: (AgentRecord) -> Void
    private let metrics: AgentMetrics?
    private var pacing = AskPacing()

    /// The latest reading the engine decided.
    private var latest: MonitorReading?
    /// The latest measurement of the parent after an answer, and when it was taken.
    private var measured: (snapshot: PressureSnapshot, at: ContinuousClock.Instant)?
    private var press: Press?
    private var asks: [Int32: Ask] = [:]
    /// The `round`, `ask` and `unanswered` lines, said in the order the rounds and asks began
    /// (a slow ask's line holds back those of the asks begun after it).
    private lazy var lines = SequencedLines(say: say)
    private var nextStep: EventLoop.Deadline?
    private var stopped = false

    /// From a reading that asked for a release to the parent back under its recovery mark.
    private struct Press {
        var began: ContinuousClock.Instant
        var asks = 0
        var freed: Int64 = 0
        /// The order the last `round` line said (by pid), and the last ask of that round: a new
        /// round (and its line) when the kernel's count reorders the services, or when the next
        /// ask does not follow the last down the order (a service asked again), so that within
        /// a round the ranks rise at each level, warning before critical.
        var announced: [Int32] = []
        var lastAsk: (level: MemoryPressureLevel, rank: Int)?
        var saidNothingToGive = false
    }

    /// An ask under way.
    private struct Ask {
        /// `nil` for an ask that failed at once.
        var exchange: ControlExchange?
        var service: AgentService
        var level: MemoryPressureLevel
        var rank: Int
        var target: Int
        var began: ContinuousClock.Instant
        var serviceBefore: UInt64?
        var parentBefore: PressureSnapshot
        /// Its line's place among the round and ask lines.
        var line: Int
        /// Past its patience: others may be asked beside it.
        var overdue = false
    }

    init(
        loop: EventLoop, roster: ServiceRoster, sampler: SnapshotSampler, ledger: ReleaseLedger, configuration: AgentConfiguration,
        metrics: AgentMetrics?, say: @escaping (AgentRecord) -> Void
    ) {
        self.loop = loop
        self.roster = roster
        self.sampler = sampler
        self.ledger = ledger
        self.configuration = configuration
        self.metrics = metrics
        self.say = say
    }

    private var policy: PressurePolicy { configuration.policy }

    /// The asks under way.
    var asksUnderWay: Int { asks.count }

    /// Takes a decided reading (the engine's thread): handed to the agent's loop.
    func offer(_ reading: MonitorReading) {
        loop.execute { [weak self] in self?.take(reading) }
    }

    /// Asks nothing more (the agent stops); asks under way are left to end by themselves.
    func stop() {
        stopped = true
        if let nextStep { loop.cancel(nextStep) }
        nextStep = nil
        for ask in asks.values { ask.exchange?.cancel() }
        asks = [:]
    }

    // MARK: Readings

    private func take(_ reading: MonitorReading) {
        guard !stopped else { return }
        latest = reading
        let snapshot = reading.event.snapshot
        metrics?.set(AgentMetricFamilies.parentUsage.name, Double(snapshot.usageBytes))
        metrics?.set(AgentMetricFamilies.parentLimit.name, Double(snapshot.capacityBytes ?? 0))
        if press == nil, reading.releaseLevel != nil, let need = need(for: snapshot, reading: reading), need.bytes >= need.smallest {
            press = Press(began: loop.now)
            var record = AgentRecord("crossing")
            (record.level, record.measure) = (reading.event.level.rawValue, Self.describe(snapshot))
            (record.parentUsageBytes, record.parentLimitBytes) = (snapshot.usageBytes, snapshot.capacityBytes)
            say(record)
            metrics?.add(AgentMetricFamilies.episodes.name)
        }
        if let measured, measured.at > reading.readAt {
            relieveIfUnder(measured.snapshot)  // the reading is older than the last answer's measurement
        } else {
            relieveIfUnder(snapshot)
        }
        step()
    }

    /// The services changed, or one says it holds more: a press that waits — for something to
    /// give, or for a service's turn — looks again (a service just found need not wait out
    /// another's back-off).
    func servicesChanged() {
        guard !stopped, press != nil else { return }
        step()
    }

    /// Ends the press when the parent is under its recovery mark, with nothing left worth asking
    /// for (a press a forecast started asks for its room to grow first).
    private func relieveIfUnder(_ snapshot: PressureSnapshot) {
        guard let current = press, let reading = latest, snapshot.capacityBytes != nil else { return }
        let asked = LevelMarks.asked(byRatio: snapshot.levelRatio, policy: policy)
        guard asked.level == .normal, !asked.inRecoveryBand else { return }
        if let need = need(for: snapshot, reading: reading), need.bytes >= need.smallest, current.asks == 0 { return }
        press = nil
        pacing.pressEnded()
        var record = AgentRecord("relieved")
        (record.milliseconds, record.asks, record.measuredFreedBytes) = ((loop.now - current.began).seconds * 1000, current.asks, current.freed)
        (record.parentUsageBytes, record.parentLimitBytes, record.measure) = (snapshot.usageBytes, snapshot.capacityBytes, Self.describe(snapshot))
        say(record)
        metrics?.set(AgentMetricFamilies.relief.name, (loop.now - current.began).seconds)
        metrics?.publish()
        if let nextStep { loop.cancel(nextStep) }
        nextStep = nil
    }

    // MARK: Asking

    /// The freshest view of the parent: the latest reading, or the measurement after the last
    /// answer when that is newer.
    private var current: PressureSnapshot? {
        guard let latest else { return measured?.snapshot }
        if let measured, measured.at > latest.readAt { return measured.snapshot }
        return latest.event.snapshot
    }

    /// Asks the next service, if the press wants one and the pacing allows it.
    private func step() {
        if let nextStep { loop.cancel(nextStep) }
        nextStep = nil
        guard !stopped, var current = press, let reading = latest, let snapshot = self.current else { return }
        guard asks.values.allSatisfy(\.overdue), asks.count < Self.maximumAsksUnderWay else { return }
        // The level the parent asks for now: the reading's decision (an OOM event is critical
        // whatever the usage), or, measured since, what usage asks for; at least warning.
        let usageAsks = LevelMarks.asked(byRatio: snapshot.levelRatio, policy: policy).level
        let level = max(.warning, snapshot == reading.event.snapshot ? max(reading.releaseLevel ?? .warning, usageAsks) : usageAsks)
        guard let (target, smallest) = need(for: snapshot, reading: reading), target >= smallest else { return }  // less than a release is worth
        let services = roster.services
        let everyone = roster.entries.values.map { entry in
            let usage = roster.admission.usage(of: entry.service, among: services)
            return AskPacing.Candidate(pid: entry.service.pid, usageBytes: usage ?? 0, canGive: roster.canGive(entry, usage: usage))
        }
        guard !everyone.isEmpty else { return }  // nobody (yet): the roster's next find looks again
        let order = everyone.sorted { $0.usageBytes != $1.usageBytes ? $0.usageBytes > $1.usageBytes : $0.pid < $1.pid }
        switch pacing.next(among: everyone, busy: Set(asks.keys), level: level, needBytes: target, smallestRelease: smallest, now: loop.now) {
        case .ask(let pid, let askLevel):
            guard let entry = roster.entries[pid], let index = order.firstIndex(where: { $0.pid == pid }) else { return }
            let follows = current.lastAsk.map { last in askLevel == last.level ? index + 1 > last.rank : askLevel > last.level } ?? true
            if current.announced != order.map(\.pid) || !follows {
                current.announced = order.map(\.pid)
                current.lastAsk = nil
                announce(order)
            }
            current.lastAsk = (askLevel, index + 1)
            press = current
            ask(entry.service, level: askLevel, rank: index + 1, target: Int(clamping: target), usage: order[index].usageBytes, parent: snapshot)
        case .wait(let until):
            press = current
            nextStep = loop.schedule(at: until) { [weak self] in
                self?.nextStep = nil
                self?.step()
            }
        case .nothingToGive:
            if !current.saidNothingToGive {
                current.saidNothingToGive = true
                sayNothingToGive(snapshot, level: level, candidates: everyone)
            }
            press = current
        case .waitForAnswers:
            press = current  // an answer steps again
        }
    }

    private var lastAskDuration = Duration.zero

    /// A round's `round` line: the services in the kernel's order, said after the lines of the
    /// asks begun before it.
    private func announce(_ order: [AskPacing.Candidate]) {
        var record = AgentRecord("round")
        record.order = order.compactMap { candidate in
            roster.entries[candidate.pid].map { AgentRecord.Ranked(pid: candidate.pid, cgroup: $0.service.cgroup.path, usageBytes: candidate.usageBytes) }
        }
        lines.deliver(record, at: lines.reserve())
        metrics?.rank(order.compactMap { roster.entries[$0.pid]?.service.cgroup.path })
    }

    /// What an ask would be for now: enough to bring the parent under its recovery mark with room
    /// for the growth expected until a service can be asked again (`ReleaseTarget`,
    /// as a service sizes its own releases), and the smallest release worth asking for; `nil`
    /// without a limit.
    private func need(for snapshot: PressureSnapshot, reading: MonitorReading) -> (bytes: UInt64, smallest: UInt64)? {
        guard let capacity = snapshot.capacityBytes else { return nil }
        let lead = reading.detectionBound + AskPacing.shortestInterval(at: .warning) + lastAskDuration
        let target = ReleaseTarget.make(for: snapshot, policy: policy, growthBytesPerSecond: reading.growthBytesPerSecond, leadTime: lead)
        return (UInt64(max(0, target.bytes)), LevelMarks(policy: policy, capacityBytes: capacity).smallestReleaseBytes)
    }

    private func ask(_ service: AgentService, level: MemoryPressureLevel, rank: Int, target: Int, usage: UInt64, parent: PressureSnapshot) {
        let began = loop.now
        pacing.asked(service.pid, at: level, now: began)
        press?.asks += 1
        metrics?.add(AgentMetricFamilies.asks.name, [("cgroup", service.cgroup.path), ("level", level.rawValue)])
        ledger.begin()
        let pid = service.pid
        let line = lines.reserve()
        do {
            let exchange = try ControlExchange(
                ControlRequest.warn(level: level, targetBytes: target).line(summary: true), with: service.socketPath, on: loop,
                timeout: configuration.askTimeout,
                admit: { (peer) throws(ControlError) in
                    guard peer.pid == pid else { throw ControlError(.endpointReplaced, "the socket now belongs to process \(peer.pid), not \(pid)") }
                },
                completion: { [unowned self] outcome in answered(pid, outcome) })
            asks[pid] = Ask(
                exchange: exchange, service: service, level: level, rank: rank, target: target, began: began, serviceBefore: usage, parentBefore: parent,
                line: line)
            loop.schedule(at: began + AgentConfiguration.askPatience) { [weak self] in
                guard let self, asks[pid]?.began == began else { return }
                asks[pid]?.overdue = true
                step()
            }
        } catch {
            asks[pid] = nil
            finish(
                Ask(
                    exchange: nil, service: service, level: level, rank: rank, target: target, began: began, serviceBefore: usage,
                    parentBefore: parent, line: line), .failure(error))
        }
    }

    private func answered(_ pid: Int32, _ outcome: ControlExchange.Outcome) {
        guard let ask = asks.removeValue(forKey: pid) else { return }
        finish(ask, outcome)
    }

    /// An ask ended: the parent and the service are measured, the answer said, the pacing told,
    /// and the next step taken.
    private func finish(_ ask: Ask, _ outcome: ControlExchange.Outcome) {
        let now = loop.now
        let took = now - ask.began
        let after = try? sampler.measure()
        if let after { measured = (after, now) }
        let parentAfter = after ?? ask.parentBefore
        ledger.end(droppedBytes: Self.drop(from: ask.parentBefore, to: parentAfter))
        let services = roster.services
        let serviceAfter = roster.admission.usage(of: ask.service, among: services)
        let freed = ask.serviceBefore.flatMap { before in serviceAfter.map { Int64(clamping: before) - Int64(clamping: $0) } }
        let labels = [("cgroup", ask.service.cgroup.path)]
        switch Self.report(of: outcome) {
        case .success(let reported):
            lastAskDuration = took
            if let before = press?.freed { press?.freed = before.addingSaturating(max(0, freed ?? 0)) }
            roster.noteReleased(ask.service.pid, bytes: reported, usage: serviceAfter)
            let smallest = parentAfter.capacityBytes.map { LevelMarks(policy: policy, capacityBytes: $0).smallestReleaseBytes } ?? 1 << 20
            pacing.answered(
                ask.service.pid, at: ask.level, freedBytes: freed ?? Int64(reported), holding: roster.entries[ask.service.pid]?.holding,
                smallestRelease: smallest, now: now)
            var record = AgentRecord("ask")
            (record.pid, record.cgroup, record.level, record.rank) = (ask.service.pid, ask.service.cgroup.path, ask.level.rawValue, ask.rank)
            (record.serviceUsageBytes, record.targetBytes, record.reportedFreedBytes, record.measuredFreedBytes) = (
                ask.serviceBefore, ask.target, reported, freed
            )
            (record.parentUsageBytes, record.parentAfterBytes, record.parentLimitBytes) = (
                ask.parentBefore.usageBytes, parentAfter.usageBytes, parentAfter.capacityBytes
            )
            record.milliseconds = took.seconds * 1000
            metrics?.add(AgentMetricFamilies.freedBytes.name, labels, Double(max(0, freed ?? 0)))
            metrics?.set(AgentMetricFamilies.lastAskFreed.name, labels, Double(freed ?? 0))
            metrics?.publish()  // the file shows each ask by the time its line is out
            lines.deliver(record, at: ask.line)
        case .failure(let error):
            pacing.unanswered(ask.service.pid, now: now)
            var record = AgentRecord("unanswered")
            (record.pid, record.cgroup, record.level, record.rank, record.milliseconds) = (
                ask.service.pid, ask.service.cgroup.path, ask.level.rawValue, ask.rank, took.seconds * 1000
            )
            (record.serviceUsageBytes, record.reason) = (ask.serviceBefore, error.message)
            metrics?.add(AgentMetricFamilies.unanswered.name, labels)
            metrics?.publish()
            lines.deliver(record, at: ask.line)
            if error.code == .endpointReplaced { roster.lose(ask.service.pid, because: error.message) }
        }
        guard !stopped else { return }
        relieveIfUnder(parentAfter)
        step()
    }

    /// What an ask's answer reported freeing, or why it is no answer.
    private static func report(of outcome: ControlExchange.Outcome) -> Result<Int, ControlError> {
        switch outcome {
        case .failure(let error):
            return .failure(error)
        case .success(let exchange):
            do {
                switch try ControlReply(line: Array(exchange.reply.utf8)) {
                case .released(_, _, let report): return .success(report.freedBytes)
                case .failure(let message): return .failure(ControlError(.refused, "refused: \(message)"))
                case .status, .coordinated: return .failure(ControlError(.unexpectedReply, "answered with something other than a release report"))
                }
            } catch {
                return .failure(error)
            }
        }
    }

    /// How far the parent's usage fell across an ask (0 when it rose): what the growth estimate
    /// adds back.
    private static func drop(from before: PressureSnapshot, to after: PressureSnapshot) -> UInt64 {
        before.usageBytes > after.usageBytes ? before.usageBytes - after.usageBytes : 0
    }

    /// Nobody can give anything: the memory over the mark is held elsewhere. Said once a press
    /// (again after an ask), with what the services can give and what no service holds.
    private func sayNothingToGive(_ snapshot: PressureSnapshot, level: MemoryPressureLevel, candidates: [AskPacing.Candidate]) {
        var record = AgentRecord("unrelievable")
        record.level = level.rawValue
        (record.parentUsageBytes, record.parentLimitBytes, record.measure) = (snapshot.usageBytes, snapshot.capacityBytes, Self.describe(snapshot))
        record.canGiveBytes = candidates.lazy.map { $0.canGive?.at(level) ?? 0 }.saturatingSum()
        let held = candidates.lazy.map(\.usageBytes).saturatingSum()
        record.heldElsewhereBytes = snapshot.usageBytes > held ? snapshot.usageBytes - held : 0
        say(record)
    }

    /// What a reading measured, for the agent's lines: `/kubepods.slice (memory.max)`, `node
    /// (MemAvailable floor 500.0 MiB)`, or both with `and`.
    static func describe(_ snapshot: PressureSnapshot) -> String {
        let parts = snapshot.constraints.map { constraint in
            constraint.isNodeFloor
                ? "node (MemAvailable floor \(ByteSize.describe((snapshot.system?.totalBytes ?? 0) &- constraint.limit.bytes)))"
                : "\(constraint.cgroupPath) (\(constraint.limit.file))"
        }
        return parts.isEmpty ? "nothing" : parts.joined(separator: " and ")
    }
}

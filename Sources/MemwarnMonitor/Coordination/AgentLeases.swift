import CgroupKit
import MemwarnRelease
import MemwarnSystem
import Synchronization

/// The ancestors whose pressure a node agent (`memwarn agent`) coordinates for this process,
/// each until its lease runs out, and the backstop that keeps a coordinated limit from ever
/// being worse than no agent.
///
/// An agent that watches a parent cgroup tells each memwarn service under it, through the
/// service's control endpoint (`ControlRequest.coordinate(cgroupPath:lease:)`), that it
/// coordinates that parent, and renews the lease well before it runs out. While the lease holds, the
/// service's monitor leaves that parent's limit out of its level (the agent asks the services
/// under it to release, largest first, one at a time), and keeps every other limit, its own
/// included. An agent that dies stops renewing: when the lease runs out the monitor counts that
/// parent again on its next reading (it schedules one for the moment the lease ends). Sooner,
/// where the agent's pid is visible (the same pid namespace): the monitor watches the agent's
/// end through a pidfd, and an agent that dies — killed mid-release, say — gives every limit
/// back to the services' own monitors within a loop turn.
///
/// The backstop: the monitor goes on watching a coordinated limit (its usage thresholds and
/// sampling follow it as any other), and counts it again, until it is back under its recovery
/// mark, when
/// - it reaches its critical mark (each service then releases on its own, as it would without
///   an agent), or
/// - it has stayed at or past its warning mark for ``answerBound`` without an ask from the agent
///   reaching this service (an agent that is slow, starved of CPU, or stuck on another service).
///
/// A busy agent cannot make a service die that its own monitor would have kept alive.
package final class AgentLeases: Sendable {
    struct Lease: Sendable, Hashable {
        /// The agent's pid, as the endpoint's peer credentials gave it.
        var agentPid: Int32
        var until: ContinuousClock.Instant
    }

    /// A coordinated limit's crossing as this process sees it, from its warning mark until it is
    /// back under its recovery mark.
    struct Crossing: Sendable, Hashable {
        /// When a reading first found it at or past the warning mark.
        var since: ContinuousClock.Instant
        /// Whether an ask of the agent's came during the crossing (or just before this process saw it).
        var answered: Bool
        /// Whether the backstop counts the limit again.
        var counted = false
    }

    private struct State {
        var leases: [String: Lease] = [:]
        var crossings: [String: Crossing] = [:]
        /// When the agent last asked this process to release, by agent pid.
        var lastAsk: [Int32: ContinuousClock.Instant] = [:]
        /// The policy whose marks the crossings are judged at.
        var policy: PressurePolicy
    }

    private let state: Locked<State>
    /// How many leases are held, as of the last change: every reading asks first, so that a
    /// service no agent coordinates (the usual case) pays one relaxed load, no lock.
    private let held = Atomic<Int>(0)

    /// The longest lease an agent may ask for.
    package static let longestLease = Duration.seconds(60)

    /// How long a coordinated limit may stay past its warning mark with no ask from the agent
    /// before the monitor counts it again. An agent relieves its parent in tens of milliseconds
    /// (its first ask goes out as the kernel reports the crossing); one that has not asked this
    /// service within a second is either busy with larger ones or not keeping up.
    package static let answerBound = Duration.seconds(1)

    /// How long before a crossing an ask still answers it: the agent may read the parent (and
    /// ask) a moment before this process's reading finds the crossing.
    static let askLead = Duration.milliseconds(500)

    /// Runs `body` with the state locked, and publishes how many leases are held after it.
    private func locked<T: Sendable>(_ body: (inout State) -> T) -> T {
        state.withLock { state in
            let result = body(&state)
            held.store(state.leases.count, ordering: .relaxed)
            return result
        }
    }

    /// Whether no lease is held (a relaxed read: a lease granted a moment ago is seen at the
    /// next reading).
    var isEmpty: Bool { held.load(ordering: .relaxed) == 0 }

    /// The time leases run out in (the monitor's loop's clock).
    let clock: LoopClock

    /// Leases judged at `policy`'s marks, in `clock`'s time.
    init(policy: PressurePolicy, clock: LoopClock = .continuous) {
        self.clock = clock
        state = Locked(State(policy: policy))
    }

    /// Judges the crossings at `policy`'s marks from now on (a policy applied while running).
    func update(policy: PressurePolicy) {
        state.withLock { $0.policy = policy }
    }

    /// Grants or renews a lease.
    ///
    /// - Returns: whether the cgroup was not coordinated before (a reading should follow).
    @discardableResult
    func grant(cgroupPath: String, agentPid: Int32, for duration: Duration, now: ContinuousClock.Instant? = nil) -> Bool {
        let now = now ?? clock.now
        return locked { state in
            let isNew = state.leases[cgroupPath].map { $0.until <= now } ?? true
            state.leases[cgroupPath] = Lease(agentPid: agentPid, until: now + min(duration, Self.longestLease))
            if isNew { state.crossings[cgroupPath] = nil }
            return isNew
        }
    }

    /// Ends a lease at once (the agent stops).
    ///
    /// - Returns: whether there was one.
    @discardableResult
    func revoke(cgroupPath: String) -> Bool {
        locked { state in
            state.crossings[cgroupPath] = nil
            return state.leases.removeValue(forKey: cgroupPath) != nil
        }
    }

    /// Ends every lease of an agent at once (it has ended).
    ///
    /// - Returns: the cgroups it coordinated.
    @discardableResult
    func revokeAll(agentPid: Int32) -> [String] {
        locked { state in
            let ended = state.leases.filter { $0.value.agentPid == agentPid }.map(\.key)
            for cgroup in ended { (state.leases[cgroup], state.crossings[cgroup]) = (nil, nil) }
            state.lastAsk[agentPid] = nil
            return ended
        }
    }

    /// The cgroups coordinated now, with their leases; expired ones are forgotten.
    func current(now: ContinuousClock.Instant? = nil) -> [String: Lease] {
        let now = now ?? clock.now
        return locked { state in
            // Every full reading asks: no lease (the usual case) costs a lock and nothing more.
            if state.leases.contains(where: { $0.value.until <= now }) { expire(&state, now: now) }
            return state.leases
        }
    }

    private func expire(_ state: inout State, now: ContinuousClock.Instant) {
        state.leases = state.leases.filter { $0.value.until > now }
        state.crossings = state.crossings.filter { state.leases[$0.key] != nil }
        state.lastAsk = state.lastAsk.filter { pid, _ in state.leases.values.contains { $0.agentPid == pid } }
    }

    /// An agent asked this process to release (a `warn` request from its pid): it answers the
    /// crossings of the limits it coordinates.
    func noteAsk(agentPid: Int32, now: ContinuousClock.Instant? = nil) {
        let now = now ?? clock.now
        locked { state in
            guard state.leases.values.contains(where: { $0.agentPid == agentPid }) else { return }
            state.lastAsk[agentPid] = now
            for (cgroup, lease) in state.leases where lease.agentPid == agentPid { state.crossings[cgroup]?.answered = true }
        }
    }

    /// Sorts a reading's ancestor limits: those a lease holds and the backstop leaves to the
    /// agent, and the rest, which count.
    ///
    /// - Parameters:
    ///   - constraints: the limits read, the watched cgroup's own among them.
    ///   - own: the watched cgroup's path: its own limit is never left to an agent.
    ///   - now: the reading's time.
    /// - Returns: the cgroups left to the agent (their limits do not count).
    func leftToAgent(_ constraints: [MemoryConstraint], excluding own: String, now: ContinuousClock.Instant? = nil) -> Set<String> {
        guard !isEmpty else { return [] }
        let now = now ?? clock.now
        return locked { state in
            if state.leases.contains(where: { $0.value.until <= now }) { expire(&state, now: now) }
            guard !state.leases.isEmpty else { return [] }
            var left = Set<String>()
            for constraint in constraints where !constraint.isHidden && constraint.cgroupPath != own {
                guard let lease = state.leases[constraint.cgroupPath] else { continue }
                let (level, inRecoveryBand) = LevelMarks(policy: state.policy, capacityBytes: constraint.limit.bytes).asked(byUsage: constraint.usageBytes)
                guard level > .normal || inRecoveryBand else {
                    state.crossings[constraint.cgroupPath] = nil  // back under its recovery mark: the crossing is over
                    left.insert(constraint.cgroupPath)
                    continue
                }
                var crossing = state.crossings[constraint.cgroupPath]
                if crossing == nil, level >= .warning {
                    let asked = state.lastAsk[lease.agentPid].map { now - $0 <= Self.askLead } ?? false
                    crossing = Crossing(since: now, answered: asked)
                }
                if var current = crossing {
                    if level == .critical || (!current.answered && now - current.since >= Self.answerBound) { current.counted = true }
                    state.crossings[constraint.cgroupPath] = current
                    if current.counted { continue }
                }
                left.insert(constraint.cgroupPath)
            }
            return left
        }
    }

    /// When the backstop should look again: the earliest moment an unanswered crossing reaches
    /// ``answerBound`` (a reading then counts its limit), or `nil`.
    func nextBackstopCheck() -> ContinuousClock.Instant? {
        locked { state in
            state.crossings.values.filter { !$0.answered && !$0.counted }.map { $0.since + Self.answerBound }.min()
        }
    }

    /// The coordinated limits the backstop counts again now.
    var countedAgain: [String] {
        locked { state in state.crossings.filter(\.value.counted).map(\.key).sorted() }
    }
}

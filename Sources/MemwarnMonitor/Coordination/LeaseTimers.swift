import Logging
import MemwarnSystem

#if canImport(Glibc)
import Glibc
#endif

/// The monitor's side of a node agent's leases (``AgentLeases``), on its loop thread: a reading
/// the moment a lease would run out unrenewed, a reading when a coordinated limit's crossing
/// would go unanswered for ``AgentLeases/answerBound``, and each leasing agent's end watched
/// through a pidfd (its leases end with it).
///
/// It asks for readings through `askForReading`; the engine decides what they mean.
final class LeaseTimers {
    private let leases: AgentLeases
    private let loop: EventLoop
    private let logger: Logger
    /// Asks the engine for a reading (source `agentLease`).
    private let askForReading: () -> Void
    /// When the earliest lease runs out unrenewed.
    private var leaseEnd: EventLoop.Deadline?
    /// When the backstop looks again at a coordinated limit's unanswered crossing.
    private var backstopCheck: EventLoop.Deadline?
    /// The coordinated limits the backstop counted again at the last reading (logged as they change).
    private var countedAgain: [String] = []
    /// The node agents holding leases, each watched for its end.
    private var agentWatches: [Int32: (watch: ProcessEndWatch, registration: EventLoop.Registration)] = [:]
    /// Agents whose end cannot be watched (pid 0: another pid namespace; no pidfds): their leases run out.
    private var unwatchableAgents: Set<Int32> = []

    init(leases: AgentLeases, loop: EventLoop, logger: Logger, askForReading: @escaping () -> Void) {
        self.leases = leases
        self.loop = loop
        self.logger = logger
        self.askForReading = askForReading
    }

    /// A lease was granted or renewed: its agent is watched, the lease's end scheduled, and a
    /// new one read at once (its limit is left out from now on).
    func granted(isNew: Bool, agentPid: Int32) {
        if agentWatches[agentPid] == nil && !unwatchableAgents.contains(agentPid) { watchAgent(agentPid) }
        scheduleLeaseEnd()
        if isNew { askForReading() }
    }

    /// A lease ended at the agent's word (it stops): read now, the limit counts again.
    func revoked() {
        scheduleLeaseEnd()
        askForReading()
    }

    /// After every reading: a reading when a coordinated limit's crossing would go unanswered
    /// for ``AgentLeases/answerBound`` (it then counts again), and a line when the limits
    /// counted again change. Without a lease, and nothing left from one, it costs one load.
    func afterReading() {
        guard !(leases.isEmpty && countedAgain.isEmpty && backstopCheck == nil) else { return }
        if let pending = backstopCheck { loop.cancel(pending) }
        backstopCheck = nil
        let counted = leases.countedAgain
        if counted != countedAgain {
            if counted.isEmpty {
                logger.notice("memory monitor: the coordinated limits are left to the node agent again", metadata: ["cgroups": "\(countedAgain)"])
            } else {
                logger.warning(
                    "memory monitor: a coordinated limit counts again: the node agent did not answer its crossing in time, or it reached the critical mark",
                    metadata: ["cgroups": "\(counted)", "answerBound": "\(AgentLeases.answerBound)"])
            }
            countedAgain = counted
        }
        guard let at = leases.nextBackstopCheck() else { return }
        backstopCheck = loop.schedule(at: at + .milliseconds(1)) { [unowned self] in
            backstopCheck = nil
            askForReading()
        }
    }

    /// Unwatches every agent. Loop thread.
    func tearDown() {
        for (_, watch) in agentWatches { loop.unwatch(watch.registration) }
        agentWatches = [:]
    }

    /// A reading the moment the earliest lease still held would run out unrenewed (every agent's,
    /// not only the one just renewed).
    private func scheduleLeaseEnd() {
        if let pending = leaseEnd { loop.cancel(pending) }
        leaseEnd = nil
        guard let earliest = leases.current().values.map(\.until).min() else { return }
        leaseEnd = loop.schedule(at: earliest + .milliseconds(1)) { [unowned self] in
            leaseEnd = nil
            askForReading()
            scheduleLeaseEnd()
        }
    }

    /// Watches an agent's end through a pidfd: when it dies, its leases end at once. Where the
    /// pidfd cannot be had (another pid namespace, an old kernel) the leases run out by themselves.
    private func watchAgent(_ pid: Int32) {
        do {
            let watch = try ProcessEndWatch(pid: pid)
            let registration = try loop.watch(watch.descriptor, for: .readable) { [unowned self] _ in agentEnded(pid) }
            agentWatches[pid] = (watch, registration)
        } catch  where error.errno == ESRCH {
            loop.schedule(at: loop.now) { [unowned self] in agentEnded(pid) }  // gone already
        } catch {
            unwatchableAgents.insert(pid)  // not tried again at every renewal
            logger.debug("a node agent's end cannot be watched; its leases run out by themselves", metadata: ["agent": "\(pid)", "error": "\(error)"])
        }
    }

    /// An agent ended: its leases end, and the limits it coordinated count again.
    private func agentEnded(_ pid: Int32) {
        loop.preconditionOnLoop()
        if let watch = agentWatches.removeValue(forKey: pid) { loop.unwatch(watch.registration) }
        let ended = leases.revokeAll(agentPid: pid)
        guard !ended.isEmpty else { return }
        logger.notice("memory monitor: the node agent ended; the limits it coordinated count again", metadata: ["agent": "\(pid)", "cgroups": "\(ended)"])
        scheduleLeaseEnd()
        askForReading()
    }
}

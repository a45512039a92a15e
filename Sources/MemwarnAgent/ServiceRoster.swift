import CgroupKit
import MemwarnControl
import MemwarnMonitor
import MemwarnSystem

/// The agent's services, found and kept leased on a thread of their own: the thread that
/// watches the parent never waits on a socket, whatever the sockets in the search path do.
///
/// Each turn (every ``AgentConfiguration/discoverEvery``) searches the control directories
/// (``ServiceFinder``: the new sockets asked together, at most one timeout for all of them) and
/// renews the leases that are due (every ``AgentConfiguration/renewEvery``, a third of the lease;
/// the renewals also go out together). A socket that failed is tried again after *its* failure,
/// soon at first and less often as it keeps failing (``retryDelay(afterFailures:)``: a service
/// just started may answer its first status late). The services found are published for the
/// watching thread (``services``), which asks them to release.
final class ServiceRoster: @unchecked Sendable {
    // @unchecked: the search state below is touched only on the roster's thread; what the
    // watching thread reads or sets is in `shared`, behind its lock.
    private struct Shared {
        var services: [AgentService] = []
        /// Services the watching thread found unanswering, with when they may be leased again.
        var unanswered: [Int32: ContinuousClock.Instant] = [:]
        var stopping = false
        var finished = false
    }

    private let shared = ConditionLock(Shared())
    private let configuration: AgentConfiguration
    private let finder: ServiceFinder
    private let say: (AgentRecord) -> Void
    private let metrics: AgentMetrics?

    /// Services whose lease was refused for good (they cannot see the parent): not renewed.
    private var leaseRefused: Set<Int32> = []
    private var unlinkedSeen: [String] = []
    /// Sockets of services outside the parent, with their pids: not asked again while they live.
    private var outsideSockets: [String: Int32] = [:]
    /// Services whose lease renewal failed, with when to try again.
    private var renewalFailed: [Int32: ContinuousClock.Instant] = [:]
    /// Sockets and directories already reported (unreachable, not searched): said once while they are there.
    private var reported: Set<String> = []
    /// Sockets whose status exchange failed: how many times in a row, and when to try them
    /// again (forgotten once they answer or are gone).
    private var failedSockets: [String: (failures: Int, retryAt: ContinuousClock.Instant)] = [:]
    private var lastRenewal: ContinuousClock.Instant?

    /// The longest a socket that failed is left alone, from its own failure; a lease renewal
    /// that failed is tried again after this long.
    static let retryUnreachableAfter = Duration.seconds(5)

    /// How long a socket that failed `failures` times in a row is left alone: 250 ms, doubled at
    /// each further failure, at most ``retryUnreachableAfter``. A service whose first status came
    /// late (it was starting, on a busy or emulated machine) is found within a second; a socket
    /// nobody serves costs one bounded batch every 5 s, on the roster's thread.
    static func retryDelay(afterFailures failures: Int) -> Duration {
        min(retryUnreachableAfter, exchangeTimeout * (1 << min(max(0, failures - 1), 8)))
    }
    /// The bound on one batch of exchanges (a search's new sockets, a turn's renewals).
    static let exchangeTimeout = Duration.milliseconds(250)

    /// The bound on a search that asks again sockets which failed up to `failures` times in a
    /// row: ``exchangeTimeout`` for new sockets, doubled at each failure, at most 2 s. A service
    /// that answers, but slowly (starting on a busy or emulated machine: three pods starting
    /// together in the system VM missed 250 ms three times running), is given longer at each try
    /// instead of being missed at every one; a socket nobody answers costs at most 2 s of the
    /// roster's thread every 5 s, never the watching thread's.
    static func searchTimeout(afterFailures failures: Int) -> Duration {
        min(.seconds(2), exchangeTimeout * (1 << min(max(0, failures), 3)))
    }

    init(configuration: AgentConfiguration, files: KernelFiles, metrics: AgentMetrics?, say: @escaping (AgentRecord) -> Void) {
        self.configuration = configuration
        self.metrics = metrics
        self.say = say
        finder = ServiceFinder(directories: configuration.controlDirectories, parent: configuration.parent, files: files)
    }

    /// The services found by the last search.
    var services: [AgentService] { shared.withLock { $0.services } }

    /// The services left out of the rounds now: they did not answer an ask a while ago.
    var unansweredNow: Set<Int32> {
        let now = ContinuousClock.now
        return shared.withLock { Set($0.unanswered.filter { $0.value > now }.keys) }
    }

    /// The watching thread found a service unanswering: it is not leased again until `until`
    /// (its lease runs out, and its own monitor counts the parent meanwhile).
    func noteUnanswered(_ pid: Int32, until: ContinuousClock.Instant) {
        shared.withLock { $0.unanswered[pid] = until }
    }

    /// Starts the roster's thread.
    ///
    /// - Throws: ``SystemError`` when the thread cannot be started.
    func start() throws(SystemError) {
        try SystemThread.start(name: "memwarn-roster") { [self] in
            // A turn at once, then each after the search interval, until it is stopped.
            repeat {
                discover()
                renewIfDue()
            } while shared.wait(timeout: configuration.discoverEvery, until: { $0.stopping ? true : nil }) == nil
            endLeases()
            shared.withLock { $0.finished = true }
        }
    }

    /// Stops the thread and waits until it has ended every lease.
    func stop() {
        shared.withLock { $0.stopping = true }
        _ = shared.wait(timeout: nil) { $0.finished ? true : nil }
    }

    // MARK: The search

    private func discover() {
        let now = ContinuousClock.now
        outsideSockets = outsideSockets.filter { Signals.processExists($0.value) }
        let known = services
        let waiting = failedSockets.filter { $0.value.retryAt > now }.keys
        let due = failedSockets.filter { $0.value.retryAt <= now }.values.map(\.failures)
        let found = finder.search(
            known: known, skipping: Set(waiting).union(outsideSockets.keys), timeout: Self.searchTimeout(afterFailures: due.max() ?? 0))
        outsideSockets.merge(found.outside) { $1 }
        reported = reported.filter { FileType.at($0, followingLinks: false) != nil }
        failedSockets = failedSockets.filter { socket, _ in FileType.at(socket, followingLinks: false) != nil }
        for service in found.services { failedSockets[service.socketPath] = nil }
        for failure in found.failures {
            // Tried again a while after it failed, not at every search: sooner the first times.
            let failures = (failedSockets[failure.socket]?.failures ?? 0) + 1
            failedSockets[failure.socket] = (failures, failure.at + Self.retryDelay(afterFailures: failures))
            guard reported.insert(failure.socket).inserted else { continue }  // said once while it is there
            var record = AgentRecord("unreachable")
            (record.socket, record.reason) = (failure.socket, failure.reason)
            say(record)
        }
        for (directory, reason) in found.untrusted where reported.insert(directory).inserted {
            var record = AgentRecord("unsearched")
            (record.socket, record.reason) = (directory, reason)
            say(record)
        }
        for service in found.services where !known.contains(where: { $0.pid == service.pid }) {
            var record = AgentRecord("found")
            (record.pid, record.cgroup) = (service.pid, service.cgroup.path)
            say(record)
        }
        for gone in known where !found.services.contains(where: { $0.pid == gone.pid }) {
            var record = AgentRecord("lost")
            (record.pid, record.cgroup, record.reason) = (gone.pid, gone.cgroup.path, "its endpoint no longer answers or has gone")
            say(record)
            metrics?.forget(cgroup: gone.cgroup.path)
        }
        let newcomers = found.services.filter { service in !known.contains { $0.pid == service.pid } }
        shared.withLock { state in
            state.services = found.services
            state.unanswered = state.unanswered.filter { pid, until in until > now && found.services.contains { $0.pid == pid } }
        }
        leaseRefused = leaseRefused.filter { pid in found.services.contains { $0.pid == pid } }
        renewalFailed = renewalFailed.filter { pid, _ in found.services.contains { $0.pid == pid } }
        lease(newcomers)
        let unlinked = found.unlinked.map(\.cgroup)
        if unlinked != unlinkedSeen {
            for child in found.unlinked where !unlinkedSeen.contains(child.cgroup) {
                var record = AgentRecord("unlinked")
                (record.cgroup, record.serviceUsageBytes) = (child.cgroup, child.usageBytes)
                say(record)
            }
            unlinkedSeen = unlinked
        }
        metrics?.set(AgentMetricFamilies.services.name, Double(found.services.count))
        metrics?.set(AgentMetricFamilies.unlinkedCgroups.name, Double(unlinked.count))
        metrics?.publish()
    }

    // MARK: Leases

    /// Leases the parent to services' monitors, together (nothing to lease on a node without a
    /// parent). A refusal for good (the parent is no ancestor the service sees: a container's,
    /// say) is not asked again; any other refusal or failure is tried again later.
    private func lease(_ services: [AgentService], duration: Duration? = nil) {
        guard let parent = configuration.parent else { return }
        let asked = services.filter { !leaseRefused.contains($0.pid) }
        guard !asked.isEmpty else { return }
        let bySocket = Dictionary(asked.map { ($0.socketPath, $0) }, uniquingKeysWith: { first, _ in first })
        let request = ControlRequest.coordinate(cgroupPath: parent.path, lease: duration ?? configuration.lease)
        let outcomes = ControlClient.exchangeEach(request.line, with: Array(bySocket.keys), timeout: Self.exchangeTimeout) {
            (socket, peer) throws(ControlError) in
            guard let service = bySocket[socket], peer.pid == service.pid else {
                throw ControlError(.endpointReplaced, "the socket now belongs to process \(peer.pid)")
            }
        }
        for (socket, outcome) in outcomes {
            guard let service = bySocket[socket] else { continue }
            var failure: String
            switch outcome {
            case .failure(let error) where error.code == .endpointReplaced:
                // Another process listens there now: found afresh by the next search.
                shared.withLock { $0.services.removeAll { $0.pid == service.pid } }
                failedSockets[socket] = nil
                continue
            case .failure(let error):
                failure = error.message
            case .success(let exchange):
                do {
                    guard case .failure(let message) = try ControlReply(line: Array(exchange.reply.utf8)) else {
                        renewalFailed[service.pid] = nil
                        continue
                    }
                    guard !message.hasPrefix(ControlRequest.refusedForGood) else {
                        leaseRefused.insert(service.pid)
                        var record = AgentRecord("lease-refused")
                        (record.pid, record.cgroup, record.reason) = (service.pid, service.cgroup.path, message)
                        say(record)
                        continue
                    }
                    failure = message
                } catch {
                    failure = error.message
                }
            }
            guard duration != .zero else { continue }
            let first = renewalFailed[service.pid] == nil
            renewalFailed[service.pid] = .now + Self.retryUnreachableAfter
            guard first else { continue }
            var record = AgentRecord("lease-unrenewed")
            (record.pid, record.cgroup, record.reason) = (
                service.pid, service.cgroup.path,
                failure + "; tried again in \(PressurePolicy.formatDuration(Self.retryUnreachableAfter)) (its lease runs out meanwhile)"
            )
            say(record)
        }
    }

    private func renewIfDue() {
        guard configuration.parent != nil else { return }
        let now = ContinuousClock.now
        guard lastRenewal.map({ now - $0 >= configuration.renewEvery }) ?? true else { return }
        lastRenewal = now
        let unanswered = shared.withLock { $0.unanswered }
        lease(services.filter { (renewalFailed[$0.pid] ?? now) <= now && (unanswered[$0.pid] ?? now) <= now })
    }

    private func endLeases() {
        lease(services, duration: .zero)
    }
}

import CgroupKit
import MemwarnControl
import MemwarnMonitor
import MemwarnRelease
import MemwarnSystem

/// The agent's services: found, leased and kept current, on the agent's loop, where nothing ever
/// waits on a socket.
///
/// **Finding.** A socket that appears in a watched control directory (``ControlDirectoryWatch``)
/// is connected to without waiting; the kernel names its listener (`SO_PEERCRED`), and a listener
/// whose memory cgroup lies under the parent is a service from that moment (`found`), ranked and
/// asked on its kernel-measured usage whatever its replies do. Its summary status — what its
/// consumers hold, by tier — is asked in the same exchange and read as it comes. A listener that
/// already has a socket (another socket of a known process) is not asked again while it lives;
/// nor is one outside the parent. At most ``maximumDiscoveries`` sockets are asked at once, in the
/// order they appeared; a socket that failed is asked again after its own back-off
/// (``retryDelay(afterFailures:)``).
///
/// **Keeping.** Each service has its own schedule: its lease renewed every
/// ``AgentConfiguration/renewEvery`` and its status refreshed every ``refreshInterval``, each an
/// exchange of its own, bounded by its own deadline: a slow service delays nothing but its own
/// replies, and a search delays no renewal. A service whose process ended or whose socket went
/// is `lost`.
///
/// **Bounded.** Every reply is read into at most ``ControlExchange/summaryReplyLimit`` bytes;
/// descriptors in use are at most ``maximumDiscoveries`` for finding, two for each service (its
/// renewal and its refresh) and a few for asks; the services kept are at most
/// ``maximumServices(descriptorLimit:)``, so the agent never runs out of descriptors whatever
/// sockets its directories hold.
final class ServiceRoster {
    /// One service as the roster keeps it.
    struct Entry {
        var service: AgentService
        /// What it last said it could give, `nil` before its first status.
        var holding: AskPacing.Holding?
        /// Its kernel-measured usage when ``holding`` was last set: what it grew by since may be
        /// more to give (``canGive(_:usage:)``).
        var holdingUsage: UInt64?
        var leaseRefused = false
        var leaseFailing = false
        var statusFailures = 0
        var renewal: ControlExchange?
        var refresh: ControlExchange?
        var renewalDeadline: EventLoop.Deadline?
        var refreshDeadline: EventLoop.Deadline?
    }

    /// What a socket is to the roster.
    enum SocketState {
        /// A service's own socket.
        case service(Int32)
        /// Another socket of a process that has a service (or is being asked): not asked again
        /// while that process lives.
        case sameProcess(Int32)
        /// Its listener is outside the parent: not asked again while it lives.
        case outside(Int32)
        /// It failed this many times in a row: asked again at `retryAt`.
        case failed(failures: Int, retryAt: ContinuousClock.Instant)
    }

    /// How many sockets are asked at once while finding services.
    static let maximumDiscoveries = 32
    /// How long a status exchange may take.
    static let statusTimeout = Duration.seconds(2)
    /// How often each service's status (what it holds) is asked again.
    static let refreshInterval = Duration.seconds(1)
    /// How soon a socket that nothing listened on yet is asked again, the first time (it was bound
    /// a moment before its service listened).
    static let listenGrace = Duration.milliseconds(20)
    /// The longest a socket that failed is left alone.
    static let longestRetryDelay = Duration.seconds(5)
    /// Descriptors kept for the watch of the parent, inotify, the metrics file and asks.
    static let reservedDescriptors = 64

    /// How long a socket that failed `failures` times in a row is left alone: 250 ms, doubled at
    /// each further failure, at most ``longestRetryDelay``.
    static func retryDelay(afterFailures failures: Int) -> Duration {
        min(longestRetryDelay, .milliseconds(250) * (1 << min(max(0, failures - 1), 8)))
    }

    /// The most services kept with `descriptorLimit` descriptors: two each, after the reserve and
    /// the finding's.
    static func maximumServices(descriptorLimit: UInt64?) -> Int {
        let limit = Int(clamping: descriptorLimit ?? 1 << 20)
        return max(1, (limit - reservedDescriptors - maximumDiscoveries) / 2)
    }

    let loop: EventLoop
    let configuration: AgentConfiguration
    let admission: ServiceAdmission
    let say: (AgentRecord) -> Void
    let metrics: AgentMetrics?
    /// Called when a service was found or lost, or said it holds more: the rounds look again.
    var changed: () -> Void = {}
    private let maximumServices: Int

    var entries: [Int32: Entry] = [:]
    private var sockets: [String: SocketState] = [:]
    private var queue: [String] = []
    private var queued: Set<String> = []
    private var discoveries: [String: (exchange: ControlExchange, pid: Int32)] = [:]
    /// False once the agent stops: no discovery starts (``stopFinding()``).
    private var isFinding = true
    /// Sockets and directories reported (unreachable, not searched): said once while they are there.
    private var reported: Set<String> = []
    /// The parent's children with no service, as last said (``noteUnlinked()``).
    var unlinkedSeen: [String] = []
    var unlinkedDeadline: (deadline: EventLoop.Deadline, at: ContinuousClock.Instant)?
    lazy var directories = ControlDirectoryWatch(
        patterns: configuration.controlDirectories, loop: loop,
        reports: .init(
            appeared: { [unowned self] in appeared($0) }, disappeared: { [unowned self] in disappeared($0) },
            untrusted: { [unowned self] in untrusted($0, $1) }))

    init(configuration: AgentConfiguration, files: KernelFiles, loop: EventLoop, metrics: AgentMetrics?, say: @escaping (AgentRecord) -> Void) {
        self.configuration = configuration
        self.loop = loop
        self.metrics = metrics
        self.say = say
        admission = ServiceAdmission(
            parent: configuration.parent, files: files, leavesOutInactiveFile: !configuration.policy.countsInactivePageCache)
        maximumServices = Self.maximumServices(descriptorLimit: ResourceLimits.openDescriptors)
    }

    /// Starts watching the control directories (a search at once). Loop thread.
    func start() {
        directories.start()
        noteUnlinked()
    }

    /// Why the control directories are watched less well than they should be, if they are.
    var watchShortfall: String? { directories.shortfall }

    /// The services found.
    var services: [AgentService] { entries.values.map(\.service) }

    /// The exchanges under way: finding, renewing, refreshing.
    var exchangesUnderWay: Int {
        discoveries.count + entries.values.reduce(0) { $0 + ($1.renewal == nil ? 0 : 1) + ($1.refresh == nil ? 0 : 1) }
    }

    // MARK: Sockets

    private func appeared(_ socket: String) {
        switch sockets[socket] {
        case .service(let pid)?:
            if Signals.processExists(pid) { return }
            lose(pid, because: "its process ended")
        case .sameProcess(let pid)?, .outside(let pid)?:
            if Signals.processExists(pid) { return }
            sockets[socket] = nil
        case .failed?, nil:
            break
        }
        enqueue(socket)
    }

    private func disappeared(_ socket: String) {
        queue.removeAll { $0 == socket }
        queued.remove(socket)
        reported.remove(socket)
        if let discovery = discoveries.removeValue(forKey: socket) { discovery.exchange.cancel() }
        if case .service(let pid)? = sockets.removeValue(forKey: socket), entries[pid]?.service.socketPath == socket {
            lose(pid, because: "its endpoint has gone")
        }
    }

    private func untrusted(_ directory: String, _ reason: String) {
        guard reported.insert(directory).inserted else { return }
        var record = AgentRecord("unsearched")
        (record.socket, record.reason) = (directory, reason)
        say(record)
    }

    private func enqueue(_ socket: String) {
        guard discoveries[socket] == nil, queued.insert(socket).inserted else { return }
        queue.append(socket)
        pump()
    }

    /// Stops finding services (the agent stops): the discoveries under way are cancelled, and none
    /// starts, so no exchange is left watched on the loop when it ends. Loop thread.
    func stopFinding() {
        isFinding = false
        queue.removeAll()
        queued.removeAll()
        for discovery in discoveries.values { discovery.exchange.cancel() }
        discoveries.removeAll()
    }

    /// Starts asking queued sockets, up to ``maximumDiscoveries`` at once.
    private func pump() {
        while isFinding, discoveries.count < Self.maximumDiscoveries, !queue.isEmpty {
            let socket = queue.removeFirst()
            queued.remove(socket)
            discover(socket)
        }
    }

    /// What the listener of a socket being asked turned out to be.
    private enum Verdict {
        case admitted(AgentService)
        case sameProcess(Int32)
        case outside(Int32, String)
        case unreadable(String)
        case tooMany
    }

    private func discover(_ socket: String) {
        var verdict: Verdict?
        do {
            let exchange = try ControlExchange(
                ControlRequest.status.line(summary: true), with: socket, on: loop, timeout: Self.statusTimeout,
                admit: { [unowned self] (peer) throws(ControlError) in
                    verdict = judge(peer, socket: socket)
                    guard case .admitted = verdict else { throw ControlError(.serviceOutOfScope, "not asked") }
                },
                completion: { [unowned self] outcome in statusAnswered(socket, outcome, discovery: true) })
            guard case .admitted(let service)? = verdict else { return }
            discoveries[socket] = (exchange, service.pid)
            admit(service)
        } catch {
            switch verdict {
            case .sameProcess(let pid)?: sockets[socket] = .sameProcess(pid)
            case .outside(let pid, _)?: sockets[socket] = .outside(pid)
            case .unreadable(let reason)?: failed(socket, reason: reason)
            case .tooMany?: failed(socket, reason: "the agent keeps \(maximumServices) services at most (its descriptor limit): asked again later")
            case .admitted?, nil: failed(socket, reason: "\(error)", refused: error.code == .noEndpoint)
            }
        }
    }

    private func judge(_ peer: PeerCredentials, socket: String) -> Verdict {
        if let known = entries[peer.pid], known.service.socketPath != socket { return .sameProcess(peer.pid) }
        if discoveries.values.contains(where: { $0.pid == peer.pid }) { return .sameProcess(peer.pid) }
        switch admission.admit(peer, socket: socket) {
        case .success(let service):
            if entries[peer.pid] == nil, entries.count >= maximumServices { return .tooMany }
            return .admitted(service)
        case .failure(.outside(let reason)): return .outside(peer.pid, reason)
        case .failure(.unreadable(let reason)): return .unreadable(reason)
        }
    }

    /// A socket whose exchange failed: said once while it is there, asked again after its back-off.
    /// A socket refused (nothing listens) the first time is asked again at once and not said: a
    /// socket appears when it is bound, a moment before its service listens.
    private func failed(_ socket: String, reason: String, refused: Bool = false) {
        var failures = 1
        if case .failed(let before, _)? = sockets[socket] { failures = before + 1 }
        let justBound = refused && failures == 1
        let retryAt = loop.now + (justBound ? Self.listenGrace : Self.retryDelay(afterFailures: failures))
        sockets[socket] = .failed(failures: failures, retryAt: retryAt)
        loop.schedule(at: retryAt) { [weak self] in
            guard let self, case .failed(_, let at)? = sockets[socket], at <= loop.now, directories.knownSockets.contains(socket) else { return }
            enqueue(socket)
        }
        if !justBound { sayUnreachable(socket, reason: reason) }
    }

    private func sayUnreachable(_ socket: String, reason: String) {
        guard reported.insert(socket).inserted else { return }
        var record = AgentRecord("unreachable")
        (record.socket, record.reason) = (socket, reason)
        say(record)
    }

    // MARK: Services

    /// A listener under the parent: a service from now on, leased and kept current.
    private func admit(_ service: AgentService) {
        sockets[service.socketPath] = .service(service.pid)
        if let known = entries[service.pid] {
            entries[service.pid]?.service = known.service  // its own socket asked again: nothing new
            return
        }
        entries[service.pid] = Entry(service: service)
        reported.remove(service.socketPath)
        var record = AgentRecord("found")
        (record.pid, record.cgroup, record.socket) = (service.pid, service.cgroup.path, service.socketPath)
        say(record)
        renew(service.pid)
        scheduleUnlinked()
        publishCounts()
        changed()
    }

    /// A service is gone: its exchanges end, its series go.
    func lose(_ pid: Int32, because reason: String) {
        guard let entry = entries.removeValue(forKey: pid) else { return }
        for exchange in [entry.renewal, entry.refresh].compactMap({ $0 }) { exchange.cancel() }
        for deadline in [entry.renewalDeadline, entry.refreshDeadline].compactMap({ $0 }) { loop.cancel(deadline) }
        if case .service(pid)? = sockets[entry.service.socketPath] { sockets[entry.service.socketPath] = nil }
        var record = AgentRecord("lost")
        (record.pid, record.cgroup, record.reason) = (pid, entry.service.cgroup.path, reason)
        say(record)
        metrics?.forget(cgroup: entry.service.cgroup.path)
        scheduleUnlinked()
        publishCounts()
        changed()
        // Another process may listen there now, or the same one again: asked afresh.
        if directories.knownSockets.contains(entry.service.socketPath) { enqueue(entry.service.socketPath) }
    }

    /// A status exchange ended: the discovery's first, or a refresh.
    func statusAnswered(_ socket: String, _ outcome: ControlExchange.Outcome, discovery: Bool) {
        if discovery {
            discoveries[socket] = nil
            pump()
        }
        guard case .service(let pid)? = sockets[socket], var entry = entries[pid] else { return }
        entry.refresh = nil
        var reason: String?
        switch outcome {
        case .success(let exchange) where exchange.peer.pid != pid:
            lose(pid, because: "its socket now belongs to process \(exchange.peer.pid)")
            return
        case .success(let exchange):
            switch try? ControlReply(line: Array(exchange.reply.utf8)) {
            case .status(let status)?:
                let before = entry.holding
                entry.holding = Self.holding(of: status)
                entry.holdingUsage = admission.usage(of: entry.service, among: services)
                entry.statusFailures = 0
                reported.remove(socket)
                entries[pid] = entry
                if let now = entry.holding, now.atCritical > before?.atCritical ?? 0 { changed() }
            case .failure(let message)?: reason = "refused its status: \(message)"
            case .released?, .coordinated?, nil: reason = "answered its status with something else"
            }
        case .failure(let error):
            reason = "\(error)"
        }
        if let reason {
            entry.statusFailures += 1
            entries[pid] = entry
            sayUnreachable(socket, reason: reason)
        }
        scheduleRefresh(pid, after: reason == nil ? Self.refreshInterval : Self.retryDelay(afterFailures: entry.statusFailures))
    }

    /// What a summary status says a service can give: at warning every tier but the suspended
    /// units, at critical every tier; each consumer's footprint less what it says is in use.
    static func holding(of status: ControlStatus) -> AskPacing.Holding {
        var holding = AskPacing.Holding(atWarning: 0, atCritical: 0)
        for consumer in status.consumers {
            let free = UInt64(max(0, consumer.footprintBytes - min(consumer.footprintBytes, max(0, consumer.inUseBytes ?? 0))))
            holding.atCritical = holding.atCritical.addingSaturating(free)
            if consumer.tier != ReleaseTier.suspendedUnits.name { holding.atWarning = holding.atWarning.addingSaturating(free) }
        }
        return holding
    }

    private func scheduleRefresh(_ pid: Int32, after wait: Duration) {
        guard var entry = entries[pid] else { return }
        if let pending = entry.refreshDeadline { loop.cancel(pending) }
        entry.refreshDeadline = loop.schedule(at: loop.now + wait) { [weak self] in
            self?.entries[pid]?.refreshDeadline = nil
            self?.refresh(pid)
        }
        entries[pid] = entry
    }

    /// Asks a service's status again (what it holds), unless its process ended.
    private func refresh(_ pid: Int32) {
        guard let entry = entries[pid], entry.refresh == nil else { return }
        guard Signals.processExists(pid) else {
            lose(pid, because: "its process ended")
            return
        }
        let socket = entry.service.socketPath
        do {
            entries[pid]?.refresh = try ControlExchange(
                ControlRequest.status.line(summary: true), with: socket, on: loop, timeout: Self.statusTimeout,
                admit: { (peer) throws(ControlError) in
                    guard peer.pid == pid else { throw ControlError(.endpointReplaced, "the socket now belongs to process \(peer.pid)") }
                },
                completion: { [unowned self] outcome in statusAnswered(socket, outcome, discovery: false) })
        } catch  where error.code == .endpointReplaced || error.code == .noEndpoint {
            lose(pid, because: error.code == .noEndpoint ? "its endpoint no longer answers" : error.message)
        } catch {
            statusAnswered(socket, .failure(error), discovery: false)
        }
    }

    /// A service reported freeing `bytes`, and measures `usage` after: it holds that much less
    /// until its next status says.
    func noteReleased(_ pid: Int32, bytes: Int, usage: UInt64?) {
        guard let holding = entries[pid]?.holding else { return }
        let freed = UInt64(max(0, bytes))
        entries[pid]?.holding = AskPacing.Holding(
            atWarning: holding.atWarning > freed ? holding.atWarning - freed : 0, atCritical: holding.atCritical > freed ? holding.atCritical - freed : 0)
        entries[pid]?.holdingUsage = usage
    }

    /// What a service could give now, as far as the agent can tell: what its last status said it
    /// holds, and what its kernel-measured usage grew by since (a cache that traffic fills grows
    /// faster than its status is refreshed, every second); `nil` before its first status.
    func canGive(_ entry: Entry, usage: UInt64?) -> AskPacing.Holding? {
        guard let holding = entry.holding else { return nil }
        guard let usage, let then = entry.holdingUsage, usage > then else { return holding }
        let grown = usage - then
        return AskPacing.Holding(atWarning: holding.atWarning.addingSaturating(grown), atCritical: holding.atCritical.addingSaturating(grown))
    }

    // MARK: Counts

    func publishCounts() {
        metrics?.set(AgentMetricFamilies.services.name, Double(entries.count))
        metrics?.publish()
    }
}

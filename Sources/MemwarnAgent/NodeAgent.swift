package import CgroupKit
import Memwarn
import MemwarnSystem

#if canImport(Glibc)
import Glibc
#endif

/// The node agent (`memwarn agent`): one per node or per parent cgroup. It finds the memwarn
/// services below the parent, takes the parent's pressure off their own monitors (a lease each,
/// renewed every second), watches the parent, and when the parent crosses its warning mark asks
/// the services to release — the largest first by kernel-measured usage, one at a time, reading
/// the parent again after each — until the parent is back under its recovery mark: warning
/// releases first, then, if the parent is still at or above its critical mark, critical ones
/// (which terminate suspended units), in the same order.
///
/// Safe by construction: the order comes from the kernel (an endpoint that lies about its size
/// cannot move itself), each ask is bounded by ``AgentConfiguration/askTimeout``, a service is
/// known by the pid that listens on its socket (`SO_PEERCRED`), never by what it says, and an
/// agent that dies stops renewing its leases: each service counts the parent's limit again
/// within ``AgentConfiguration/lease``.
package final class NodeAgent {
    private let configuration: AgentConfiguration
    private let files: KernelFiles
    private let emit: (AgentRecord) -> Void
    private let metrics: AgentMetrics?
    private let gauge: ParentGauge
    private let finder: ServiceFinder
    private let rule: SamplingRule

    private var services: [AgentService] = []
    /// Services whose lease was refused (they cannot see the parent): not renewed.
    private var leaseRefused: Set<Int32> = []
    private var unlinkedSeen: [String] = []
    /// Sockets of services outside the parent, with their pids: not asked again while they live.
    private var outsideSockets: [String: Int32] = [:]
    /// Services whose lease renewal failed, with when to try again: a hung endpoint does not cost
    /// the renewal of the others a timeout every second.
    private var renewalFailed: [Int32: ContinuousClock.Instant] = [:]
    /// Sockets already reported unreachable (a stale socket of another user's, say): said once.
    private var reportedUnreachable: Set<String> = []
    /// Whether the metrics file could not be written last time (said once until it can).
    private var metricsUnwritten = false
    /// Sockets whose status exchange failed, with when to try them again.
    private var failedSockets: [String: ContinuousClock.Instant] = [:]
    /// Services that did not answer an ask, with when they may be asked again: a hung endpoint
    /// costs its timeout once, not at every round.
    private var unanswered: [Int32: ContinuousClock.Instant] = [:]
    /// How long a service that did not answer is left out of the rounds.
    static let retryUnansweredAfter = Duration.seconds(30)
    /// How long a socket that failed is left alone.
    static let retryUnreachableAfter = Duration.seconds(5)
    private var lastDiscovery: ContinuousClock.Instant?
    private var lastRenewal: ContinuousClock.Instant?
    private var episode: Episode?
    private var last: (usage: UInt64, at: ContinuousClock.Instant)?
    private var rising = 0.0
    /// How long the last answered ask took (the growth allowance of the next ask's target).
    private var lastAskSeconds = 0.0
    private var falling = 0.0

    private struct Episode {
        var began: ContinuousClock.Instant
        var nextRound: ContinuousClock.Instant
        var asks = 0
        var freed: Int64 = 0
    }

    package init(configuration: AgentConfiguration, files: KernelFiles = .host, metricsFile: String? = nil, emit: @escaping (AgentRecord) -> Void) {
        self.configuration = configuration
        self.files = files
        self.emit = emit
        metrics = metricsFile.map(AgentMetrics.init(path:))
        gauge = ParentGauge(parent: configuration.parent, minAvailableBytes: configuration.minAvailableBytes, files: files)
        finder = ServiceFinder(
            directories: configuration.controlDirectories, parent: configuration.parent, files: files,
            timeout: .milliseconds(250))
        rule = SamplingRule(policy: configuration.policy)
    }

    private var policy: PressurePolicy { configuration.policy }

    /// How far below the recovery mark an ask aims, as a share of the limit.
    static let targetMargin = 0.02

    /// Runs until `isStopped` says so (checked at least every poll interval), then ends every
    /// lease (the services count the parent's limit again at once).
    ///
    /// - Throws: CgroupKit's `CgroupError` when the parent cannot be read (gone, no limit and no
    ///   `--min-available`).
    package func run(isStopped: () -> Bool) throws(CgroupError) {
        var reading = try gauge.read()
        var started = AgentRecord("started")
        (started.measure, started.parentUsageBytes, started.parentLimitBytes) = (try gauge.describe(), reading.usageBytes, reading.capacityBytes)
        emit(started)
        defer { endLeases() }
        while !isStopped() {
            let now = ContinuousClock.now
            if lastDiscovery.map({ now - $0 >= configuration.discoverEvery }) ?? true { discover() }
            renewIfDue()
            do {
                reading = try gauge.read()
            } catch  where error.isTransient {
                nap(.milliseconds(5))
                continue
            }
            record(reading)
            act(on: reading)
            nap(wait(after: reading))
        }
        emit(AgentRecord("stopped"))
    }

    // MARK: Services

    private func discover() {
        lastDiscovery = .now
        let now = ContinuousClock.now
        failedSockets = failedSockets.filter { $0.value > now }
        outsideSockets = outsideSockets.filter { Signals.processExists($0.value) }
        let found = finder.search(known: services, skipping: Set(failedSockets.keys).union(outsideSockets.keys))
        outsideSockets.merge(found.outside) { $1 }
        reportedUnreachable = reportedUnreachable.filter { files.exists($0) }
        for failure in found.failures {
            // Asked again in a while, not at every search: a hung endpoint would stall each one.
            failedSockets[failure.socket] = now + Self.retryUnreachableAfter
            guard reportedUnreachable.insert(failure.socket).inserted else { continue }  // said once while it is there
            var record = AgentRecord("unreachable")
            (record.cgroup, record.reason) = (failure.socket, failure.reason)
            emit(record)
        }
        for service in found.services where !services.contains(where: { $0.pid == service.pid }) {
            var record = AgentRecord("found")
            (record.pid, record.cgroup) = (service.pid, service.cgroup.path)
            emit(record)
        }
        for gone in services where !found.services.contains(where: { $0.pid == gone.pid }) {
            var record = AgentRecord("lost")
            (record.pid, record.cgroup, record.reason) = (gone.pid, gone.cgroup.path, "its endpoint no longer answers or has gone")
            emit(record)
        }
        let newcomers = found.services.filter { service in !services.contains { $0.pid == service.pid } }
        services = found.services
        leaseRefused = leaseRefused.filter { pid in services.contains { $0.pid == pid } }
        renewalFailed = renewalFailed.filter { pid, _ in services.contains { $0.pid == pid } }
        for service in newcomers { lease(service) }
        let unlinked = found.unlinked.map(\.cgroup)
        if unlinked != unlinkedSeen {
            for child in found.unlinked where !unlinkedSeen.contains(child.cgroup) {
                var record = AgentRecord("unlinked")
                (record.cgroup, record.serviceUsageBytes) = (child.cgroup, child.usageBytes)
                emit(record)
            }
            unlinkedSeen = unlinked
        }
        metrics?.set("memwarn_agent_services", Double(services.count))
        metrics?.set("memwarn_agent_unlinked_cgroups", Double(unlinked.count))
        writeMetrics()
    }

    /// Leases the parent to a service's monitor (nothing to lease on a node without a parent).
    /// A refusal for good (the parent is no ancestor the service sees: a container's, say) is not
    /// asked again; any other refusal or failure is tried again later (``retryUnreachableAfter``).
    private func lease(_ service: AgentService, duration: Duration? = nil) {
        guard let parent = configuration.parent, !leaseRefused.contains(service.pid) else { return }
        let request = ControlRequest.coordinate(cgroupPath: parent.path, lease: duration ?? configuration.lease)
        var failure: String
        do {
            let exchange = try ControlClient.exchange(request.line, with: service.socketPath, timeout: .milliseconds(250)) { (peer) throws(ControlError) in
                guard peer.pid == service.pid else { throw ControlError(.endpointReplaced, Self.replaced + "the socket now belongs to process \(peer.pid)") }
            }
            guard case .failure(let message) = try ControlReply(line: Array(exchange.reply.utf8)) else {
                renewalFailed[service.pid] = nil
                return
            }
            guard !message.hasPrefix(ControlRequest.refusedForGood) else {
                leaseRefused.insert(service.pid)
                var record = AgentRecord("lease-refused")
                (record.pid, record.cgroup, record.reason) = (service.pid, service.cgroup.path, message)
                emit(record)
                return
            }
            failure = message
        } catch  where error.code == .endpointReplaced {
            services.removeAll { $0.pid == service.pid }  // another process listens there now: found afresh by the next search
            failedSockets[service.socketPath] = nil
            return
        } catch {
            failure = error.message
        }
        guard duration != .zero else { return }
        let first = renewalFailed[service.pid] == nil
        renewalFailed[service.pid] = .now + Self.retryUnreachableAfter
        guard first else { return }
        var record = AgentRecord("lease-unrenewed")
        (record.pid, record.cgroup, record.reason) = (service.pid, service.cgroup.path, failure + "; tried again in 5 s (its lease runs out meanwhile)")
        emit(record)
    }

    /// How the failure of a service whose socket another process took begins.
    private static let replaced = "replaced: "

    private func renewIfDue() {
        guard configuration.parent != nil else { return }
        let now = ContinuousClock.now
        guard lastRenewal.map({ now - $0 >= configuration.renewEvery }) ?? true else { return }
        lastRenewal = now
        for service in services where (renewalFailed[service.pid] ?? now) <= now && (unanswered[service.pid] ?? now) <= now {
            lease(service)
        }
    }

    private func endLeases() {
        for service in services { lease(service, duration: .zero) }
    }

    /// A service's kernel-measured usage: its memory cgroup's, unless another service shares the
    /// cgroup (or it is the parent itself), then its resident set (`/proc/PID/statm`).
    private func measuredUsage(_ service: AgentService) -> UInt64? {
        let shared = services.contains { $0.pid != service.pid && $0.cgroup == service.cgroup } || service.cgroup == configuration.parent
        if !shared, let usage = try? CgroupMemoryReader(location: service.cgroup, files: files).usage() { return usage }
        guard let text = try? files.read("/proc/\(service.pid)/statm") else { return nil }
        let fields = text.split(separator: " ")
        guard fields.count > 1, let pages = UInt64(fields[1]) else { return nil }
        return pages * UInt64(VirtualMemory.pageSize)
    }

    // MARK: The parent

    private func record(_ reading: ParentReading) {
        let now = ContinuousClock.now
        if let last, (now - last.at).seconds >= 0.001 {
            let rate = (Double(reading.usageBytes) - Double(last.usage)) / (now - last.at).seconds
            (rising, falling) = (max(0, rate), max(0, -rate))
        }
        last = (reading.usageBytes, now)
        metrics?.set("memwarn_agent_parent_usage_bytes", Double(reading.usageBytes))
        metrics?.set("memwarn_agent_parent_limit_bytes", Double(reading.capacityBytes))
    }

    private func act(on reading: ParentReading) {
        let now = ContinuousClock.now
        if var current = episode {
            if reading.ratio < policy.recoveryRatio {
                var record = AgentRecord("relieved")
                (record.milliseconds, record.asks, record.measuredFreedBytes) = ((now - current.began).seconds * 1000, current.asks, current.freed)
                (record.parentUsageBytes, record.parentLimitBytes, record.measure) = (reading.usageBytes, reading.capacityBytes, reading.measure)
                emit(record)
                metrics?.set("memwarn_agent_relief_seconds", (now - current.began).seconds)
                writeMetrics()
                episode = nil
                return
            }
            guard now >= current.nextRound else { return }
            round(from: reading, episode: &current)
            episode = current
            return
        }
        guard reading.ratio >= policy.warningRatio else { return }
        var record = AgentRecord("crossing")
        (record.level, record.measure) = (reading.ratio >= policy.criticalRatio ? "critical" : "warning", reading.measure)
        (record.parentUsageBytes, record.parentLimitBytes) = (reading.usageBytes, reading.capacityBytes)
        emit(record)
        metrics?.add("memwarn_agent_episodes_total")
        var current = Episode(began: now, nextRound: now)
        round(from: reading, episode: &current)
        episode = current
    }

    /// One round: every service at warning, the largest first, until the parent is under its
    /// recovery mark; then, if it is still at or above its critical mark, at critical.
    private func round(from reading: ParentReading, episode: inout Episode) {
        var current = reading
        let order = services.map { ($0, measuredUsage($0) ?? 0) }.sorted { $0.1 != $1.1 ? $0.1 > $1.1 : $0.0.pid < $1.0.pid }
        guard !order.isEmpty else {
            episode.nextRound = .now + configuration.roundCooldown  // nobody to ask (yet): the crossing said so
            return
        }
        var announced = AgentRecord("round")
        announced.order = order.map { AgentRecord.Ranked(pid: $0.0.pid, cgroup: $0.0.cgroup.path, usageBytes: $0.1) }
        emit(announced)
        levels: for level in [MemoryPressureLevel.warning, .critical] {
            if level == .critical && current.ratio < policy.criticalRatio { break }
            for (rank, entry) in order.enumerated() where (unanswered[entry.0.pid] ?? .now) <= .now {
                if current.ratio < policy.recoveryRatio { break levels }
                current = ask(entry.0, rank: rank + 1, level: level, parent: current, episode: &episode)
                renewIfDue()
            }
        }
        episode.nextRound = .now + configuration.roundCooldown
        writeMetrics()
    }

    /// Asks one service to release enough to bring the parent under its recovery mark.
    ///
    /// - Returns: the parent read again after the ask (the reading before, if it cannot be read).
    private func ask(_ service: AgentService, rank: Int, level: MemoryPressureLevel, parent: ParentReading, episode: inout Episode) -> ParentReading {
        // To the recovery mark, 2 % of the limit below it, and what the parent grows by while the
        // ask is under way (its measured rise over twice the last ask's time, at least 100 ms;
        // at most 10 % of the limit): a parent left a page above the mark would cost another ask.
        let lead = max(0.1, 2 * lastAskSeconds)
        let growthAllowance = min(rising * lead, Double(parent.capacityBytes) / 10)
        let target = Int(clamping: parent.excess(over: max(0, policy.recoveryRatio - Self.targetMargin)) + UInt64(growthAllowance))
        let before = measuredUsage(service)
        let began = ContinuousClock.now
        let labels = [("cgroup", service.cgroup.path), ("level", level.rawValue)]
        metrics?.add("memwarn_agent_asks_total", labels)
        episode.asks += 1
        let outcome: Result<Int, ControlError>
        do {
            let exchange = try ControlClient.exchange(
                ControlRequest.warn(level: level, targetBytes: target).line, with: service.socketPath,
                timeout: configuration.askTimeout
            ) { (peer) throws(ControlError) in
                guard peer.pid == service.pid else {
                    throw ControlError(.endpointReplaced, "the socket now belongs to process \(peer.pid), not \(service.pid)")
                }
            }
            switch try ControlReply(line: Array(exchange.reply.utf8)) {
            case .released(_, _, let report): outcome = .success(report.freedBytes)
            case .failure(let message): outcome = .failure(ControlError(.refused, "refused: \(message)"))
            case .status, .coordinated: outcome = .failure(ControlError(.unexpectedReply, "answered with something other than a release report"))
            }
        } catch {
            outcome = .failure(error)
        }
        let took = (ContinuousClock.now - began).seconds * 1000
        let after = (try? gauge.read()) ?? parent
        switch outcome {
        case .success(let reported):
            lastAskSeconds = took / 1000
            let freed = before.flatMap { before in measuredUsage(service).map { Int64(before) - Int64($0) } }
            episode.freed += max(0, freed ?? 0)
            var record = AgentRecord("ask")
            (record.pid, record.cgroup, record.level, record.rank) = (service.pid, service.cgroup.path, level.rawValue, rank)
            (record.serviceUsageBytes, record.targetBytes, record.reportedFreedBytes, record.measuredFreedBytes) = (before, target, reported, freed)
            (record.parentUsageBytes, record.parentAfterBytes, record.parentLimitBytes) = (parent.usageBytes, after.usageBytes, after.capacityBytes)
            record.milliseconds = took
            emit(record)
            metrics?.add("memwarn_agent_freed_bytes_total", [labels[0]], Double(max(0, freed ?? 0)))
            metrics?.set("memwarn_agent_last_ask_freed_bytes", [labels[0]], Double(freed ?? 0))
        case .failure(let error):
            unanswered[service.pid] = .now + Self.retryUnansweredAfter
            var record = AgentRecord("unanswered")
            (record.pid, record.cgroup, record.level, record.rank, record.milliseconds) = (service.pid, service.cgroup.path, level.rawValue, rank, took)
            (record.serviceUsageBytes, record.reason) = (before, error.message)
            emit(record)
            metrics?.add("memwarn_agent_unanswered_total", [labels[0]])
        }
        record(after)
        return after
    }

    // MARK: Time

    /// The next reading's wait: as adaptive sampling's rule sets it for the parent's marks,
    /// never past the next search, lease renewal or round.
    private func wait(after reading: ParentReading) -> Duration {
        let capacity = Double(reading.capacityBytes)
        func mark(_ ratio: Double) -> UInt64 { UInt64(capacity * ratio) }
        var wait = rule.interval(
            usage: reading.usageBytes, marksAbove: [mark(policy.warningRatio), mark(policy.criticalRatio), reading.capacityBytes],
            marksBelow: [mark(policy.recoveryRatio), mark(policy.warningRatio), mark(policy.criticalRatio)],
            risingBytesPerSecond: rising, fallingBytesPerSecond: falling)
        wait = min(wait, configuration.discoverEvery)  // new services are found within it
        if configuration.parent != nil { wait = min(wait, configuration.renewEvery) }
        if let episode { wait = min(wait, max(.milliseconds(5), episode.nextRound - .now)) }
        return wait
    }

    private func nap(_ duration: Duration) {
        SystemThread.sleep(for: duration)  // at most the search interval: the loop then looks at isStopped
    }

    private func writeMetrics() {
        guard let metrics else { return }
        do {
            try metrics.write()
            metricsUnwritten = false
        } catch {
            guard !metricsUnwritten else { return }
            metricsUnwritten = true
            var record = AgentRecord("metrics-unwritten")
            record.reason = "\(error)"
            emit(record)
        }
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
}

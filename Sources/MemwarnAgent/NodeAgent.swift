package import CgroupKit
import MemwarnControl
import MemwarnMonitor
import MemwarnRelease
import MemwarnSystem

#if canImport(Glibc)
import Glibc
#endif

/// The node agent (`memwarn agent`): one per node or per parent cgroup. It finds the memwarn
/// services below the parent, takes the parent's pressure off their own monitors (a lease each,
/// renewed every third of it), watches the parent, and when the parent crosses its warning mark
/// asks the services to release — the largest first by kernel-measured usage, one at a time,
/// reading the parent again after each — until the parent is back under its recovery mark:
/// warning releases first, then, if the parent is still at or above its critical mark, critical
/// ones (which terminate suspended units), in the same order.
///
/// Never worse than no agent:
/// - the parent is watched on a thread that waits on nothing but the kernel: its events where the
///   host has them (``ParentEvents``) and adaptive sampling; finding and leasing services runs on
///   a thread of its own (``ServiceRoster``), so junk or hung sockets in the search path cannot
///   delay a crossing;
/// - while the parent stays past its warning mark the next round follows at once
///   (``AgentConfiguration/pressingRoundPause``), not after the cool-down;
/// - each service keeps a backstop: its monitor counts the parent again when the agent leaves a
///   crossing unanswered for a second, or at the critical mark (MemwarnMonitor's `AgentLeases`).
///
/// Safe by construction: the order comes from the kernel (an endpoint that lies about its size
/// cannot move itself), each ask is bounded by ``AgentConfiguration/askTimeout``, a service is
/// known by the pid that listens on its socket (`SO_PEERCRED`), never by what it says, and an
/// agent that dies stops renewing its leases: each service counts the parent's limit again
/// within ``AgentConfiguration/lease``.
package final class NodeAgent {
    private let configuration: AgentConfiguration
    private let files: KernelFiles
    private let say: (AgentRecord) -> Void
    private let metrics: AgentMetrics?
    private let gauge: ParentGauge
    private let roster: ServiceRoster
    private let rule: SamplingRule
    private var events: ParentEvents?

    /// How long a service that did not answer is left out of the rounds.
    static let retryUnansweredAfter = Duration.seconds(30)
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
        let sink = RecordSink(emit)  // both threads report: one line at a time
        say = sink.say
        let metrics = metricsFile.map { AgentMetrics(path: $0, say: sink.say) }
        self.metrics = metrics
        gauge = ParentGauge(parent: configuration.parent, minAvailableBytes: configuration.minAvailableBytes, files: files)
        roster = ServiceRoster(configuration: configuration, files: files, metrics: metrics, say: sink.say)
        rule = SamplingRule(policy: configuration.policy)
    }

    private var policy: PressurePolicy { configuration.policy }

    /// How far below the recovery mark an ask aims, as a share of the limit.
    static let targetMargin = 0.02

    /// The longest wait between two readings of the parent: the loop then also looks at `isStopped`.
    static let longestWait = Duration.milliseconds(250)

    /// Runs until `isStopped` says so (checked at least every ``longestWait``), then ends every
    /// lease (the services count the parent's limit again at once).
    ///
    /// - Throws: CgroupKit's `CgroupError` when the parent cannot be read (gone, no limit and no
    ///   `--min-available`), or the roster's thread cannot be started.
    package func run(isStopped: () -> Bool) throws(CgroupError) {
        var reading = try gauge.read()
        var started = AgentRecord("started")
        (started.measure, started.parentUsageBytes, started.parentLimitBytes) = (try gauge.describe(), reading.usageBytes, reading.capacityBytes)
        say(started)
        do {
            try roster.start()  // its first search at once, beside the watch: nothing it meets delays a crossing
        } catch {
            throw CgroupError(.unsupported, "the agent's roster thread could not be started: \(error)")
        }
        defer { roster.stop() }
        watchEvents(for: reading)
        while !isStopped() {
            do {
                reading = try gauge.read()
            } catch  where error.isTransient {
                SystemThread.sleep(for: .milliseconds(5))
                continue
            }
            if reading.capacityBytes != events?.plannedCapacity, configuration.parent?.version == .v1 { watchEvents(for: reading) }
            record(reading)
            act(on: reading)
            _ = events?.wait(upTo: wait(after: reading))
        }
        say(AgentRecord("stopped"))
    }

    /// Registers the kernel's events for the parent's marks (again when its limit changed).
    private func watchEvents(for reading: ParentReading) {
        let next = ParentEvents(parent: configuration.parent, capacityBytes: reading.capacityBytes, policy: policy, files: files)
        if next.description != events?.description {
            var record = AgentRecord("watching")
            record.reason = next.description
            say(record)
        }
        events = next
    }

    /// A service's kernel-measured usage: its memory cgroup's, unless another service shares the
    /// cgroup (or it is the parent itself), then its resident set (`/proc/PID/statm`).
    private func measuredUsage(_ service: AgentService, among services: [AgentService]) -> UInt64? {
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
        metrics?.set(AgentMetricFamilies.parentUsage.name, Double(reading.usageBytes))
        metrics?.set(AgentMetricFamilies.parentLimit.name, Double(reading.capacityBytes))
    }

    private func act(on reading: ParentReading) {
        let now = ContinuousClock.now
        if var current = episode {
            if reading.ratio < policy.recoveryRatio {
                var record = AgentRecord("relieved")
                (record.milliseconds, record.asks, record.measuredFreedBytes) = ((now - current.began).seconds * 1000, current.asks, current.freed)
                (record.parentUsageBytes, record.parentLimitBytes, record.measure) = (reading.usageBytes, reading.capacityBytes, reading.measure)
                say(record)
                metrics?.set(AgentMetricFamilies.relief.name, (now - current.began).seconds)
                metrics?.publish()
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
        say(record)
        metrics?.add(AgentMetricFamilies.episodes.name)
        var current = Episode(began: now, nextRound: now)
        round(from: reading, episode: &current)
        episode = current
    }

    /// One round: every service at warning, the largest first, until the parent is under its
    /// recovery mark; then, if it is still at or above its critical mark, at critical.
    private func round(from reading: ParentReading, episode: inout Episode) {
        var current = reading
        let services = roster.services
        // Services that did not answer an ask are left out for a while (the roster keeps them,
        // and leases them again only then): a hung endpoint costs its timeout once.
        var leftOut = roster.unansweredNow
        let order = services.map { ($0, measuredUsage($0, among: services) ?? 0) }.sorted { $0.1 != $1.1 ? $0.1 > $1.1 : $0.0.pid < $1.0.pid }
        guard !order.isEmpty else {
            // Nobody to ask (yet: the first search may be under way): look again after the next search.
            episode.nextRound = .now + configuration.discoverEvery
            return
        }
        metrics?.rank(order.map(\.0.cgroup.path))
        var announced = AgentRecord("round")
        announced.order = order.map { AgentRecord.Ranked(pid: $0.0.pid, cgroup: $0.0.cgroup.path, usageBytes: $0.1) }
        say(announced)
        levels: for level in [MemoryPressureLevel.warning, .critical] {
            if level == .critical && current.ratio < policy.criticalRatio { break }
            for (rank, entry) in order.enumerated() where !leftOut.contains(entry.0.pid) {
                if current.ratio < policy.recoveryRatio { break levels }
                let answer = ask(entry.0, rank: rank + 1, level: level, parent: current, among: services, episode: &episode)
                current = answer.parent
                if !answer.answered { leftOut.insert(entry.0.pid) }
            }
        }
        // Still past the warning mark after every service was asked: growth outpaces the
        // releases, and the next round follows at once (a short pause: the services' releases
        // take effect, and the parent's growth is read again); between the marks, the cool-down.
        episode.nextRound = .now + (current.ratio >= policy.warningRatio ? configuration.pressingRoundPause : configuration.roundCooldown)
        metrics?.publish()
    }

    /// Asks one service to release enough to bring the parent under its recovery mark.
    ///
    /// - Returns: the parent read again after the ask (the reading before, if it cannot be read),
    ///   and whether the service answered.
    private func ask(
        _ service: AgentService, rank: Int, level: MemoryPressureLevel, parent: ParentReading, among services: [AgentService], episode: inout Episode
    ) -> (parent: ParentReading, answered: Bool) {
        // To the recovery mark, 2 % of the limit below it, and what the parent grows by while the
        // ask is under way (its measured rise over twice the last ask's time, at least 100 ms;
        // at most 10 % of the limit): a parent left a page above the mark would cost another ask.
        let lead = max(0.1, 2 * lastAskSeconds)
        let growthAllowance = min(rising * lead, Double(parent.capacityBytes) / 10)
        let target = Int(clamping: parent.excess(over: max(0, policy.recoveryRatio - Self.targetMargin)) + UInt64(growthAllowance))
        let before = measuredUsage(service, among: services)
        let began = ContinuousClock.now
        let labels = [("cgroup", service.cgroup.path), ("level", level.rawValue)]
        metrics?.add(AgentMetricFamilies.asks.name, labels)
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
            let freed = before.flatMap { before in measuredUsage(service, among: services).map { Int64(before) - Int64($0) } }
            let (sum, overflow) = episode.freed.addingReportingOverflow(max(0, freed ?? 0))
            episode.freed = overflow ? .max : sum
            var record = AgentRecord("ask")
            (record.pid, record.cgroup, record.level, record.rank) = (service.pid, service.cgroup.path, level.rawValue, rank)
            (record.serviceUsageBytes, record.targetBytes, record.reportedFreedBytes, record.measuredFreedBytes) = (before, target, reported, freed)
            (record.parentUsageBytes, record.parentAfterBytes, record.parentLimitBytes) = (parent.usageBytes, after.usageBytes, after.capacityBytes)
            record.milliseconds = took
            metrics?.add(AgentMetricFamilies.freedBytes.name, [labels[0]], Double(max(0, freed ?? 0)))
            metrics?.set(AgentMetricFamilies.lastAskFreed.name, [labels[0]], Double(freed ?? 0))
            metrics?.publish()  // the file shows each ask by the time its line is out
            say(record)
        case .failure(let error):
            roster.noteUnanswered(service.pid, until: .now + Self.retryUnansweredAfter)
            var record = AgentRecord("unanswered")
            (record.pid, record.cgroup, record.level, record.rank, record.milliseconds) = (service.pid, service.cgroup.path, level.rawValue, rank, took)
            (record.serviceUsageBytes, record.reason) = (before, error.message)
            metrics?.add(AgentMetricFamilies.unanswered.name, [labels[0]])
            metrics?.publish()
            say(record)
        }
        record(after)
        if case .success = outcome { return (after, true) }
        return (after, false)
    }

    // MARK: Time

    /// The next reading's wait: as adaptive sampling's rule sets it for the parent's marks
    /// (the kernel's events, where the host has them, wake the agent sooner), never past the
    /// next round nor ``longestWait``.
    private func wait(after reading: ParentReading) -> Duration {
        let capacity = Double(reading.capacityBytes)
        func mark(_ ratio: Double) -> UInt64 { UInt64(capacity * ratio) }
        var wait = rule.interval(
            usage: reading.usageBytes, marksAbove: [mark(policy.warningRatio), mark(policy.criticalRatio), reading.capacityBytes],
            marksBelow: [mark(policy.recoveryRatio), mark(policy.warningRatio), mark(policy.criticalRatio)],
            risingBytesPerSecond: rising, fallingBytesPerSecond: falling)
        wait = min(wait, Self.longestWait)
        if let episode { wait = min(wait, max(.milliseconds(1), episode.nextRound - .now)) }
        return wait
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

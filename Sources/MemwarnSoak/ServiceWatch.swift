import CgroupKit
import Foundation
import MemwarnControl
import MemwarnMonitor
import MemwarnSystem

/// Reads a soaked service's own telemetry once a second while it runs: memwarn's control endpoint
/// of any process in its cgroup, the cgroup's anonymous memory, and its `/metrics` when given.
/// It polls on a thread of its own: a slow endpoint blocks it, never Swift's cooperative pool
/// (where the soak's sampling, timers and signal handling run).
final class ServiceWatch: Sendable {
    private let cgroup: MemoryCgroup
    private let start: ContinuousClock.Instant
    private let metrics: HTTPGet.Address?
    private let shedCounterNames: [String]
    private let requestCounterNames: [String]
    private let telemetry = Locked(ServiceTelemetry())
    private let interval: Duration
    /// The run's limit: a fall of anonymous memory that counts as a release is 1 % of it.
    private let limitBytes: UInt64
    /// Whether the thread is asked to stop, and whether it has.
    private let life = ConditionLock((stopping: false, ended: false))

    init(
        cgroup: MemoryCgroup, limitBytes: UInt64, start: ContinuousClock.Instant, metrics: HTTPGet.Address?, shedCounterNames: [String],
        requestCounterNames: [String] = [], interval: Duration = .seconds(1)
    ) {
        self.cgroup = cgroup
        self.limitBytes = limitBytes
        self.start = start
        self.metrics = metrics
        self.shedCounterNames = shedCounterNames
        self.requestCounterNames = requestCounterNames
        self.interval = interval
    }

    /// The telemetry so far.
    var current: ServiceTelemetry { telemetry.withLock { $0 } }

    /// Starts polling on a thread of its own.
    ///
    /// - Throws: ``SystemError`` when no thread can be made.
    func startPolling() throws(SystemError) {
        try SystemThread.start(name: "memwarn-soak-watch") { [self] in
            var lastAnswer: (at: ContinuousClock.Instant, exhausted: Bool)?
            while true {
                poll(lastAnswer: &lastAnswer)
                let stopping = life.wait(timeout: interval) { $0.stopping ? true : nil } ?? false
                if stopping { break }
            }
            life.withLock { $0.ended = true }
        }
    }

    /// Stops polling and waits until the thread has ended (at most a poll's length).
    func stop() {
        life.withLock { $0.stopping = true }
        _ = life.wait(timeout: .seconds(5)) { $0.ended ? true : nil }
    }

    /// One poll. `lastAnswer` is when the endpoint last answered and whether memory was
    /// exhausted then: the time since counts as exhausted when it was.
    private func poll(lastAnswer: inout (at: ContinuousClock.Instant, exhausted: Bool)?) {
        let (anonymousBefore, status, anonymous) = Self.readAround(anonymous: { Self.anonymousBytes(cgroup.reader) }, status: { self.status() })
        let now = ContinuousClock.now
        let seconds = (now - start).seconds
        telemetry.withLock { telemetry in
            if let status {
                telemetry.linksMemwarn = true
                telemetry.releases = status.released.releases
                telemetry.releasedBytesByTier = status.released.freedBytesByTier
                telemetry.releasedBytesByConsumer = status.released.freedBytesByConsumer
                telemetry.forecastWarnings = status.forecasts.raised
                telemetry.falseForecasts = status.forecasts.falseAlarms
                telemetry.releaseSamples.append(
                    .init(
                        seconds: seconds, releases: status.released.releases,
                        freedBytes: status.released.freedBytesByTier.values.lazy.saturatingSum(), releaseSeconds: status.released.seconds))
                telemetry.lastConsumers = status.consumers.map {
                    .init(name: $0.name, tier: $0.tier, footprintBytes: $0.footprintBytes, inUseBytes: $0.inUseBytes)
                }
                if let inUse = telemetry.lastInUseBytes, inUse > (telemetry.peakInUse?.bytes ?? 0) {
                    var byConsumer: [String: Int] = [:]
                    for consumer in status.consumers {
                        if let bytes = consumer.inUseBytes, bytes > 0 { byConsumer[consumer.name] = [byConsumer[consumer.name] ?? 0, bytes].saturatingSum() }
                    }
                    telemetry.peakInUse = .init(seconds: seconds, bytes: inUse, byConsumer: byConsumer)
                }
                if let last = lastAnswer, last.exhausted { telemetry.exhaustedSeconds += (now - last.at).seconds }
                lastAnswer = (now, status.isMemoryExhausted)
            }
            // A service that answered before and not now gives no footprint to subtract: no sample.
            guard let anonymous, status != nil || !telemetry.linksMemwarn else { return }
            // The service's word, summed without trapping (its reply's sizes are checked when read).
            let footprint = status.map { UInt64(max(0, $0.consumers.lazy.map(\.footprintBytes).saturatingSum())) }
            // The heap less the consumers, when the consumers' memory is heap (not an mmapped arena).
            let heapFloor = footprint.flatMap { footprint in status?.process?.heapInUseBytes.flatMap { $0 >= footprint ? $0 - footprint : nil } }
            if let sample = MemoryTrend.Sample.paired(
                seconds: seconds, anonymousBefore: anonymousBefore ?? anonymous, anonymousAfter: anonymous, footprintBytes: footprint,
                heapFloorBytes: heapFloor, limitBytes: limitBytes)
            {
                telemetry.floorSamples.append(sample)
            } else {
                telemetry.floorSamplesLeftOut.append(seconds)
            }
        }
        if let metrics, let response = try? HTTPGet.get(metrics, timeout: .milliseconds(800)), (200..<300).contains(response.status) {
            let scraped = (ContinuousClock.now - start).seconds
            let counters = Self.shedCounters(in: response.body, names: shedCounterNames)
            let requests = Self.requestCounters(in: response.body, names: requestCounterNames)
            let hits = Self.counters(in: response.body) { $0.hasSuffix("_cache_hits_total") }
            let misses = Self.counters(in: response.body) { $0.hasSuffix("_cache_misses_total") }
            telemetry.withLock { telemetry in
                telemetry.metricsScraped = true
                if !counters.isEmpty { telemetry.shedCounters = counters }
                if !requests.isEmpty {
                    telemetry.requestCounterNames = requests.keys.sorted()
                    telemetry.requestSamples.append(.init(seconds: scraped, value: requests.values.reduce(0, +)))
                }
                if !hits.isEmpty, !misses.isEmpty {
                    telemetry.cacheSamples.append(.init(seconds: scraped, hits: hits.values.reduce(0, +), misses: misses.values.reduce(0, +)))
                }
            }
        }
    }

    /// The first process in the cgroup whose control endpoint answers `status`: for each, every
    /// `<pid>.sock` in the search directories in turn, until one whose listener is that very
    /// process answers (a stale socket, or one another process listens on, is passed over).
    private func status() -> ControlStatus? {
        let directories = ControlDirectory.everyUsersPaths  // the service may run as another user
        for pid in (try? cgroup.processes()) ?? [] {
            for socket in directories.map({ ControlDirectory.socketPath(for: pid, in: $0) }) where Self.isOwnersSocket(socket) {
                if let status = Self.status(of: pid, at: socket, timeout: .milliseconds(800)) { return status }
            }
        }
        return nil
    }

    /// Process `pid`'s status through the endpoint at `socket`, when the process that listens
    /// there (its `SO_PEERCRED` pid, whatever the socket's name says) is `pid` itself, as the
    /// node agent believes only the kernel's word for a socket's process; `nil` otherwise, or
    /// when it does not answer with a status.
    static func status(of pid: Int32, at socket: String, timeout: Duration) -> ControlStatus? {
        let exchange = try? ControlClient.exchange(ControlRequest.status.line, with: socket, timeout: timeout) { (peer) throws(ControlError) in
            guard peer.pid == pid else {
                throw ControlError(.untrusted, "\(socket) is served by process \(peer.pid), not by \(pid), which its name gives")
            }
        }
        guard let exchange, case .status(let status)? = try? ControlReply(line: Array(exchange.reply.utf8)) else { return nil }
        return status
    }

    /// Whether `path` is a socket (not a link to one) owned by its directory's owner.
    static func isOwnersSocket(_ path: String) -> Bool {
        let directory = String(path[..<(path.lastIndex(of: "/") ?? path.startIndex)])
        guard let socket = try? FileStatus.at(path, followingLinks: false), socket.type == .socket,
            let folder = try? FileStatus.at(directory, followingLinks: false), folder.type == .directory
        else { return false }
        return socket.owner == folder.owner
    }

    /// Anonymous memory: v1 `memory.stat` `total_rss` (the cgroup and its children), v2 `anon`.
    /// One poll's reads, in their order: anonymous memory, the service's status, anonymous memory
    /// again. A release while the service answers shows as a fall between the two reads
    /// (``MemoryTrend/Sample/paired(seconds:anonymousBefore:anonymousAfter:footprintBytes:heapFloorBytes:limitBytes:)``).
    static func readAround<Status>(anonymous: () -> UInt64?, status: () -> Status?) -> (before: UInt64?, status: Status?, after: UInt64?) {
        let before = anonymous()
        let answer = status()
        return (before, answer, anonymous())
    }

    static func anonymousBytes(_ reader: CgroupMemoryReader) -> UInt64? {
        guard let stat = try? reader.stat() else { return nil }
        return stat["total_rss"] ?? stat["anon"]
    }

    /// The shedding counters in a Prometheus text page, summed over their labels: those named,
    /// or else every sample whose name ends in `_shed_total`.
    static func shedCounters(in page: String, names: [String]) -> [String: Double] {
        counters(in: page) { names.isEmpty ? $0.hasSuffix("_shed_total") : names.contains($0) }
    }

    /// The request counters in a Prometheus text page, summed over their labels: those named
    /// (`--request-counter`), or else every sample whose name ends in `_requests_total`.
    static func requestCounters(in page: String, names: [String]) -> [String: Double] {
        counters(in: page) { names.isEmpty ? $0.hasSuffix("_requests_total") : names.contains($0) }
    }

    /// The samples of a Prometheus text page whose name `matches`, summed over their labels. A
    /// sample that is not finite is passed over; a sum past what a `Double` holds is +Inf, and
    /// ``CounterSum`` reads it as no count where the sums make a figure.
    static func counters(in page: String, where matches: (String) -> Bool) -> [String: Double] {
        var sums: [String: Double] = [:]
        for line in page.split(separator: "\n") where !line.hasPrefix("#") {
            let name = String(line.prefix { $0 != "{" && $0 != " " })
            // `name{labels} value [timestamp]`: the value is the first field after the labels.
            let labelsEnd = line.lastIndex(of: "}").map { line.index(after: $0) } ?? line.index(line.startIndex, offsetBy: name.count)
            guard matches(name), let valueText = line[labelsEnd...].split(separator: " ").first, let value = Double(valueText), value.isFinite
            else { continue }
            sums[name, default: 0] += value
        }
        return sums
    }
}

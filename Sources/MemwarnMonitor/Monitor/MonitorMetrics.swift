import MemwarnRelease
import MemwarnSystem
import Metrics

/// The metrics a monitor reports, named as Prometheus expects (`_bytes`, `_seconds`, `_total`);
/// ``MemwarnMetric/all`` names each family with its labels and help text, and the article
/// "Metrics, series by series" lists them.
final class MonitorMetrics: Sendable {
    private let factory: any MetricsFactory
    private let level: Gauge
    private let usage: Gauge
    private let limit: Gauge
    private let levelChanges: [MemoryPressureLevel: Counter]
    private let growth: Gauge
    private let secondsToCritical: Gauge
    private let secondsToLimit: Gauge
    private let forecastRaised: Counter
    private let forecastConfirmed: Counter
    private let forecastFalse: Counter
    private let releases: [MemoryPressureLevel: Counter]
    private let releasedBytes: [ReleaseTier: Counter]
    private let releaseDuration: Timer
    private let exhausted: Gauge
    private let exhaustions: Counter
    /// Made at the first exhaustion: the family is absent until there is a floor to report.
    private let floor = Locked<Gauge?>(nil)
    private let transientErrors: Counter
    private let usageSamples: Counter
    private let cgroupUsage: Gauge
    private let bindingDepth: Gauge
    private let coordinated: Gauge
    private let reportedTally = Locked(ForecastTally())
    private let trimSteps: [TrimPlanner.Change.Outcome: Counter]
    /// The footprint series published, so that those of consumers gone can be destroyed.
    private let footprints = Locked<[FootprintSeries: (footprint: Gauge, inUse: Gauge?)]>([:])

    init(factory: any MetricsFactory) {
        self.factory = factory
        level = Gauge(label: MemwarnMetric.level.name, factory: factory)
        usage = Gauge(label: MemwarnMetric.usage.name, factory: factory)
        limit = Gauge(label: MemwarnMetric.limit.name, factory: factory)
        levelChanges = Dictionary(
            uniqueKeysWithValues: MemoryPressureLevel.allCases.map {
                ($0, Counter(label: MemwarnMetric.levelChanges.name, dimensions: [("level", $0.rawValue)], factory: factory))
            })
        growth = Gauge(label: MemwarnMetric.growth.name, factory: factory)
        secondsToCritical = Gauge(label: MemwarnMetric.secondsToCritical.name, factory: factory)
        secondsToLimit = Gauge(label: MemwarnMetric.secondsToLimit.name, factory: factory)
        forecastRaised = Counter(label: MemwarnMetric.forecastWarnings.name, dimensions: [("outcome", "raised")], factory: factory)
        forecastConfirmed = Counter(label: MemwarnMetric.forecastWarnings.name, dimensions: [("outcome", "confirmed")], factory: factory)
        forecastFalse = Counter(label: MemwarnMetric.forecastWarnings.name, dimensions: [("outcome", "false")], factory: factory)
        releases = Dictionary(
            uniqueKeysWithValues: [MemoryPressureLevel.warning, .critical].map {
                ($0, Counter(label: MemwarnMetric.releases.name, dimensions: [("level", $0.rawValue)], factory: factory))
            })
        releasedBytes = Dictionary(
            uniqueKeysWithValues: ReleaseTier.all.map {
                ($0, Counter(label: MemwarnMetric.releasedBytes.name, dimensions: [("tier", $0.name)], factory: factory))
            })
        releaseDuration = Timer(label: MemwarnMetric.releaseDuration.name, preferredDisplayUnit: .seconds, factory: factory)
        exhausted = Gauge(label: MemwarnMetric.exhausted.name, factory: factory)
        exhaustions = Counter(label: MemwarnMetric.exhaustions.name, factory: factory)
        transientErrors = Counter(label: MemwarnMetric.transientErrors.name, factory: factory)
        usageSamples = Counter(label: MemwarnMetric.usageSamples.name, factory: factory)
        cgroupUsage = Gauge(label: MemwarnMetric.cgroupUsage.name, factory: factory)
        bindingDepth = Gauge(label: MemwarnMetric.bindingDepth.name, factory: factory)
        coordinated = Gauge(label: MemwarnMetric.coordinatedCgroups.name, factory: factory)
        trimSteps = Dictionary(
            uniqueKeysWithValues: TrimPlanner.Change.Outcome.allCases.map {
                ($0, Counter(label: MemwarnMetric.trimSteps.name, dimensions: [("outcome", $0.rawValue)], factory: factory))
            })
    }

    /// The proactive trim changed a consumer's ceiling.
    func recordTrim(_ outcome: TrimPlanner.Change.Outcome) {
        trimSteps[outcome]?.increment()
    }

    /// The monitor was armed.
    func record(_ arming: MonitorArming) {
        Gauge(label: MemwarnMetric.armedAfter.name, dimensions: [("since", "monitor_created")], factory: factory).record(arming.duration.seconds)
        if let age = arming.sinceProcessStart {
            Gauge(label: MemwarnMetric.armedAfter.name, dimensions: [("since", "process_start")], factory: factory).record(age.seconds)
        }
    }

    /// Usage was sampled once.
    func recordUsageSample() { usageSamples.increment() }

    /// A read failed transiently (the monitor retries it).
    func recordTransientError() { transientErrors.increment() }

    /// Every reading: usage, limit, level, growth and forecast; forecast outcomes as they settle.
    func record(_ reading: MonitorReading) {
        let event = reading.event
        usage.record(Int64(clamping: event.snapshot.usageBytes))
        limit.record(Int64(clamping: event.snapshot.capacityBytes ?? 0))
        if let own = event.snapshot.cgroupUsageBytes { cgroupUsage.record(Int64(clamping: own)) }
        bindingDepth.record(Self.depth(of: event.snapshot))
        coordinated.record(event.snapshot.coordinatedCgroups.count)
        level.record(PressureMonitor.gaugeValue(event.level))
        growth.record(reading.growthBytesPerSecond)
        secondsToCritical.record(event.forecast?.secondsToCritical ?? .infinity)
        secondsToLimit.record(event.forecast?.secondsToLimit ?? .infinity)
        let previous = reportedTally.withLock { tally in
            defer { tally = reading.tally }
            return tally
        }
        forecastRaised.increment(by: max(0, reading.tally.raised - previous.raised))
        forecastConfirmed.increment(by: max(0, reading.tally.confirmed - previous.confirmed))
        forecastFalse.increment(by: max(0, reading.tally.falseAlarms - previous.falseAlarms))
    }

    /// How many levels above the watched cgroup the binding limit is set: 0 its own (a hidden
    /// limit counts as one above the namespace's root), -1 when none applies.
    static func depth(of snapshot: PressureSnapshot) -> Int {
        guard let binding = snapshot.binding, let own = snapshot.cgroup?.path else { return -1 }
        if binding.isHidden { return own.split(separator: "/").count + 1 }
        return own.split(separator: "/").count - binding.cgroupPath.split(separator: "/").count
    }

    /// A level change.
    func recordChange(to newLevel: MemoryPressureLevel) {
        levelChanges[newLevel]?.increment()
    }

    /// An automatic release, and the footprints of the consumers after it.
    func record(_ report: ReleaseReport, consumers: [any MemoryConsumer]) {
        releases[report.level]?.increment()
        releaseDuration.recordNanoseconds(Int64(clamping: report.duration.microseconds) * 1_000)
        for entry in report.entries where entry.bytesFreed > 0 {
            releasedBytes[entry.tier]?.increment(by: entry.bytesFreed)
        }
        publishFootprints(of: consumers)
    }

    /// One footprint series: a consumer's name (or `otherConsumers`) and tier.
    private struct FootprintSeries: Hashable {
        var consumer: String
        var tier: String
    }

    /// `memwarn_consumer_footprint_bytes` and `memwarn_consumer_in_use_bytes`: a series for each
    /// of the `maximumConsumerNames` largest consumers by name (consumers sharing a name
    /// and tier summed), the rest summed per tier as `otherConsumers`; the series
    /// of a consumer that is gone (deallocated, unregistered, or no longer among the largest)
    /// is destroyed, so the label set stays bounded however many names — unit ids from request
    /// data, say — come and go. The in-use series exists only while some consumer of the
    /// series says what it has in use.
    private func publishFootprints(of consumers: [any MemoryConsumer]) {
        var byName: [FootprintSeries: (bytes: Int, inUse: Int?)] = [:]
        for consumer in consumers {
            let series = FootprintSeries(consumer: consumer.name, tier: consumer.tier.name)
            let footprint = max(0, consumer.footprintBytes)
            byName[series, default: (0, nil)].bytes += footprint
            if let said = consumer.inUseBytes {  // the consumer's word, within what it holds
                byName[series, default: (0, nil)].inUse = (byName[series]?.inUse ?? 0) + min(max(0, said), footprint)
            }
        }
        let ranked = byName.sorted {
            $0.value.bytes != $1.value.bytes ? $0.value.bytes > $1.value.bytes : ($0.key.consumer, $0.key.tier) < ($1.key.consumer, $1.key.tier)
        }
        var values: [FootprintSeries: (bytes: Int, inUse: Int?)] = [:]
        for (index, entry) in ranked.enumerated() {
            let series =
                index < ReleaseTotals.maximumConsumerNames
                ? entry.key
                : FootprintSeries(consumer: ReleaseTotals.otherConsumers, tier: entry.key.tier)
            values[series, default: (0, nil)].bytes += entry.value.bytes
            if let inUse = entry.value.inUse { values[series, default: (0, nil)].inUse = (values[series]?.inUse ?? 0) + inUse }
        }
        footprints.withLock { published in
            for (series, gauges) in published where values[series] == nil {
                gauges.footprint.destroy()
                gauges.inUse?.destroy()
                published[series] = nil
            }
            for (series, value) in values {
                let dimensions = [("consumer", series.consumer), ("tier", series.tier)]
                var gauges = published[series] ?? (Gauge(label: MemwarnMetric.consumerFootprint.name, dimensions: dimensions, factory: factory), nil)
                gauges.footprint.record(value.bytes)
                if let inUse = value.inUse {
                    let gauge = gauges.inUse ?? Gauge(label: MemwarnMetric.consumerInUse.name, dimensions: dimensions, factory: factory)
                    gauge.record(inUse)
                    gauges.inUse = gauge
                } else if let gone = gauges.inUse {
                    gone.destroy()
                    gauges.inUse = nil
                }
                published[series] = gauges
            }
        }
    }

    /// The exhausted state changed.
    func record(_ exhaustion: MemoryExhaustion) {
        exhausted.record(exhaustion.isExhausted ? 1 : 0)
        if exhaustion.isExhausted {
            exhaustions.increment()
            let gauge = floor.withLock { made in
                if let made { return made }
                let gauge = Gauge(label: MemwarnMetric.exhaustedFloor.name, factory: factory)
                made = gauge
                return gauge
            }
            gauge.record(Int64(clamping: exhaustion.floorBytes))
        }
    }
}

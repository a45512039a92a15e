import MemwarnRelease
import MemwarnSystem
import Metrics

/// The metrics a monitor reports, named as Prometheus expects (`_bytes`, `_seconds`, `_total`):
///
/// | metric | kind | what |
/// |---|---|---|
/// | `memwarn_level` | gauge | 0 normal, 1 warning, 2 critical |
/// | `memwarn_usage_bytes`, `memwarn_limit_bytes` | gauge | every reading: the binding limit and the usage measured against it (an ancestor's counts its siblings) |
/// | `memwarn_cgroup_usage_bytes` | gauge | the watched cgroup's own usage |
/// | `memwarn_binding_depth` | gauge | which limit binds: 0 the cgroup's own, 1 its parent's, 2 the grandparent's…; -1 none (the system's memory) |
/// | `memwarn_coordinated_cgroups` | gauge | ancestors whose limits a node agent coordinates now |
/// | `memwarn_level_changes_total{level}` | counter | level changes |
/// | `memwarn_growth_bytes_per_second` | gauge | the sustained growth rate (0 when none) |
/// | `memwarn_forecast_seconds_to_critical`, `memwarn_forecast_seconds_to_limit` | gauge | `+Inf` when not growing |
/// | `memwarn_forecast_warnings_total{outcome}` | counter | `raised`, `confirmed`, `false` |
/// | `memwarn_releases_total{level}` | counter | automatic releases |
/// | `memwarn_released_bytes_total{tier}` | counter | bytes freed, by tier |
/// | `memwarn_release_duration_seconds` | timer | each automatic release |
/// | `memwarn_consumer_footprint_bytes{consumer,tier}` | gauge | after each release: the 64 largest consumers by name, the rest as `(other consumers)`; a gone consumer's series is destroyed |
/// | `memwarn_exhausted` | gauge | 1 while exhausted |
/// | `memwarn_exhaustions_total` | counter | entries into the exhausted state |
/// | `memwarn_floor_bytes` | gauge | the floor reported on entering it |
/// | `memwarn_usage_samples_total` | counter | cheap reads of usage (adaptive sampling, guard bands) |
/// | `memwarn_armed_after_seconds{since}` | gauge | arming's duration (`since="monitor_created"`) and the process's age when armed (`since="process_start"`) |
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
    private let floor: Gauge
    private let transientErrors: Counter
    private let usageSamples: Counter
    private let cgroupUsage: Gauge
    private let bindingDepth: Gauge
    private let coordinated: Gauge
    private let reportedTally = Locked(ForecastTally())
    /// The footprint series published, so that those of consumers gone can be destroyed.
    private let footprints = Locked<[FootprintSeries: Gauge]>([:])

    init(factory: any MetricsFactory) {
        self.factory = factory
        level = Gauge(label: "memwarn_level", factory: factory)
        usage = Gauge(label: "memwarn_usage_bytes", factory: factory)
        limit = Gauge(label: "memwarn_limit_bytes", factory: factory)
        levelChanges = Dictionary(
            uniqueKeysWithValues: MemoryPressureLevel.allCases.map {
                ($0, Counter(label: "memwarn_level_changes_total", dimensions: [("level", $0.rawValue)], factory: factory))
            })
        growth = Gauge(label: "memwarn_growth_bytes_per_second", factory: factory)
        secondsToCritical = Gauge(label: "memwarn_forecast_seconds_to_critical", factory: factory)
        secondsToLimit = Gauge(label: "memwarn_forecast_seconds_to_limit", factory: factory)
        forecastRaised = Counter(label: "memwarn_forecast_warnings_total", dimensions: [("outcome", "raised")], factory: factory)
        forecastConfirmed = Counter(label: "memwarn_forecast_warnings_total", dimensions: [("outcome", "confirmed")], factory: factory)
        forecastFalse = Counter(label: "memwarn_forecast_warnings_total", dimensions: [("outcome", "false")], factory: factory)
        releases = Dictionary(
            uniqueKeysWithValues: [MemoryPressureLevel.warning, .critical].map {
                ($0, Counter(label: "memwarn_releases_total", dimensions: [("level", $0.rawValue)], factory: factory))
            })
        releasedBytes = Dictionary(
            uniqueKeysWithValues: ReleaseTier.all.map {
                ($0, Counter(label: "memwarn_released_bytes_total", dimensions: [("tier", $0.name)], factory: factory))
            })
        releaseDuration = Timer(label: "memwarn_release_duration_seconds", preferredDisplayUnit: .seconds, factory: factory)
        exhausted = Gauge(label: "memwarn_exhausted", factory: factory)
        exhaustions = Counter(label: "memwarn_exhaustions_total", factory: factory)
        floor = Gauge(label: "memwarn_floor_bytes", factory: factory)
        transientErrors = Counter(label: "memwarn_transient_errors_total", factory: factory)
        usageSamples = Counter(label: "memwarn_usage_samples_total", factory: factory)
        cgroupUsage = Gauge(label: "memwarn_cgroup_usage_bytes", factory: factory)
        bindingDepth = Gauge(label: "memwarn_binding_depth", factory: factory)
        coordinated = Gauge(label: "memwarn_coordinated_cgroups", factory: factory)
    }

    /// The monitor was armed.
    func record(_ arming: MonitorArming) {
        Gauge(label: "memwarn_armed_after_seconds", dimensions: [("since", "monitor_created")], factory: factory).record(arming.duration.seconds)
        if let age = arming.sinceProcessStart {
            Gauge(label: "memwarn_armed_after_seconds", dimensions: [("since", "process_start")], factory: factory).record(age.seconds)
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

    /// One footprint series: a consumer's name (or ``/MemwarnRelease/ReleaseTotals/otherConsumers``) and tier.
    private struct FootprintSeries: Hashable {
        var consumer: String
        var tier: String
    }

    /// `memwarn_consumer_footprint_bytes`: a series for each of the
    /// ``/MemwarnRelease/ReleaseTotals/maximumConsumerNames`` largest consumers by name (consumers sharing a name
    /// and tier summed), the rest summed per tier as ``/MemwarnRelease/ReleaseTotals/otherConsumers``; the series
    /// of a consumer that is gone (deallocated, unregistered, or no longer among the largest)
    /// is destroyed, so the label set stays bounded however many names — unit ids from request
    /// data, say — come and go.
    private func publishFootprints(of consumers: [any MemoryConsumer]) {
        let sized = consumers.map { (name: $0.name, tier: $0.tier.name, bytes: $0.footprintBytes) }
        var byName: [FootprintSeries: Int] = [:]
        for consumer in sized { byName[FootprintSeries(consumer: consumer.name, tier: consumer.tier), default: 0] += consumer.bytes }
        let ranked = byName.sorted {
            $0.value != $1.value ? $0.value > $1.value : ($0.key.consumer, $0.key.tier) < ($1.key.consumer, $1.key.tier)
        }
        var values: [FootprintSeries: Int] = [:]
        for (index, entry) in ranked.enumerated() {
            let series =
                index < ReleaseTotals.maximumConsumerNames
                ? entry.key
                : FootprintSeries(consumer: ReleaseTotals.otherConsumers, tier: entry.key.tier)
            values[series, default: 0] += entry.value
        }
        footprints.withLock { published in
            for (series, gauge) in published where values[series] == nil {
                gauge.destroy()
                published[series] = nil
            }
            for (series, bytes) in values {
                let gauge =
                    published[series]
                    ?? Gauge(
                        label: "memwarn_consumer_footprint_bytes",
                        dimensions: [("consumer", series.consumer), ("tier", series.tier)], factory: factory)
                published[series] = gauge
                gauge.record(bytes)
            }
        }
    }

    /// The exhausted state changed.
    func record(_ exhaustion: MemoryExhaustion) {
        exhausted.record(exhaustion.isExhausted ? 1 : 0)
        if exhaustion.isExhausted {
            exhaustions.increment()
            floor.record(Int64(clamping: exhaustion.floorBytes))
        }
    }
}

/// A series family memwarn reports, with the `# HELP` text a Prometheus exposition carries for it.
///
/// The monitor reports through swift-metrics, which carries no help text: a Prometheus client
/// behind it (swift-prometheus's `PrometheusMetricsFactory`, say) writes memwarn's families with
/// a `# TYPE` line alone. ``addingHelp(to:for:)`` puts the help back into a scraped exposition:
///
/// ```swift
/// router.get("/metrics") { _, _ in MemwarnMetric.addingHelp(to: registry.emitToString()) }
/// ```
///
/// The article "Metrics, series by series" lists every family with its labels and meaning.
public struct MemwarnMetric: Sendable, Hashable {
    /// How a family is reported through swift-metrics.
    package enum Kind: String, Sendable, Hashable {
        /// A value that goes up and down (swift-metrics' `Gauge`).
        case gauge
        /// A count that only goes up (`Counter`).
        case counter
        /// Durations (`Timer`): a Prometheus client writes a histogram.
        case timer
    }

    /// The family's name, such as `memwarn_level`.
    public var name: String
    /// How it is reported.
    package var kind: Kind
    /// Its labels, in the order they are given (empty for most).
    package var labels: [String]
    /// The `# HELP` text: what a value means, in one line.
    public var help: String

    /// A family.
    ///
    /// - Parameters:
    ///   - name: the family's name.
    ///   - kind: how it is reported.
    ///   - labels: its labels.
    ///   - help: what a value means, in one line.
    package init(_ name: String, _ kind: Kind, labels: [String] = [], help: String) {
        self.name = name
        self.kind = kind
        self.labels = labels
        self.help = help
    }
}

extension MemwarnMetric {
    /// Every family a ``PressureMonitor`` reports, in the article's order.
    public static let all: [MemwarnMetric] = [
        level, usage, limit, cgroupUsage, bindingDepth, coordinatedCgroups, levelChanges, growth, secondsToCritical, secondsToLimit,
        forecastWarnings, releases, releasedBytes, releaseDuration, consumerFootprint, consumerInUse, exhausted, exhaustions,
        exhaustedFloor, transientErrors, usageSamples, armedAfter, trimSteps,
    ]

    static let level = MemwarnMetric(
        "memwarn_level", .gauge, help: "The monitor's level at its latest reading: 0 normal, 1 warning, 2 critical.")
    static let usage = MemwarnMetric(
        "memwarn_usage_bytes", .gauge,
        help: "Usage measured against the binding limit at the latest reading (an ancestor's limit counts its siblings).")
    static let limit = MemwarnMetric(
        "memwarn_limit_bytes", .gauge, help: "The binding limit at the latest reading; the machine's memory when no limit applies.")
    static let cgroupUsage = MemwarnMetric(
        "memwarn_cgroup_usage_bytes", .gauge, help: "The watched cgroup's own usage at the latest reading.")
    static let bindingDepth = MemwarnMetric(
        "memwarn_binding_depth", .gauge,
        help:
            "Which limit binds: 0 the cgroup's own, 1 its parent's, 2 the grandparent's (a limit hidden above a container's cgroup namespace counts one above its root); -1 none."
    )
    static let coordinatedCgroups = MemwarnMetric(
        "memwarn_coordinated_cgroups", .gauge,
        help: "Ancestors whose limits a node agent coordinates for this process now (the monitor leaves them to the agent).")
    static let levelChanges = MemwarnMetric(
        "memwarn_level_changes_total", .counter, labels: ["level"], help: "Level changes, by the level entered.")
    static let growth = MemwarnMetric(
        "memwarn_growth_bytes_per_second", .gauge, help: "The sustained growth rate of usage; 0 when usage is not clearly growing.")
    static let secondsToCritical = MemwarnMetric(
        "memwarn_forecast_seconds_to_critical", .gauge,
        help: "Seconds until usage reaches the critical mark at the current growth; +Inf when not growing.")
    static let secondsToLimit = MemwarnMetric(
        "memwarn_forecast_seconds_to_limit", .gauge, help: "Seconds until usage reaches the limit at the current growth; +Inf when not growing.")
    static let forecastWarnings = MemwarnMetric(
        "memwarn_forecast_warnings_total", .counter, labels: ["outcome"],
        help: "Forecast warnings: raised, confirmed (the mark was reached), false (the growth did not come).")
    static let releases = MemwarnMetric(
        "memwarn_releases_total", .counter, labels: ["level"], help: "Automatic releases, by the level behind them (warning, critical).")
    static let releasedBytes = MemwarnMetric(
        "memwarn_released_bytes_total", .counter, labels: ["tier"], help: "Bytes the consumers said they freed in automatic releases, by tier.")
    static let releaseDuration = MemwarnMetric(
        "memwarn_release_duration_seconds", .timer, help: "How long each automatic release took, heap trimming included.")
    static let consumerFootprint = MemwarnMetric(
        "memwarn_consumer_footprint_bytes", .gauge, labels: ["consumer", "tier"],
        help: "What each consumer holds after the latest release: the 64 largest by name, the rest as (other consumers).")
    static let consumerInUse = MemwarnMetric(
        "memwarn_consumer_in_use_bytes", .gauge, labels: ["consumer", "tier"],
        help: "What of its footprint each consumer says is in use after the latest release (no release can give it); only consumers that say.")
    static let exhausted = MemwarnMetric(
        "memwarn_exhausted", .gauge, help: "1 while memory is exhausted (every tier released and usage still at the critical mark), else 0.")
    static let exhaustions = MemwarnMetric(
        "memwarn_exhaustions_total", .counter, help: "Entries into the exhausted state.")
    static let exhaustedFloor = MemwarnMetric(
        "memwarn_exhausted_floor_bytes", .gauge,
        help: "Usage right after the release that found nothing more to give, at the latest entry into exhaustion; absent until the first.")
    static let transientErrors = MemwarnMetric(
        "memwarn_transient_errors_total", .counter,
        help: "Reads of the kernel's files that failed transiently (descriptors or memory exhausted, interrupted) and were retried.")
    static let usageSamples = MemwarnMetric(
        "memwarn_usage_samples_total", .counter, help: "Cheap reads of usage: adaptive sampling and the guard bands.")
    static let armedAfter = MemwarnMetric(
        "memwarn_armed_after_seconds", .gauge, labels: ["since"],
        help: "Arming's duration (since=monitor_created) and the process's age when the monitor was armed (since=process_start).")
    static let trimSteps = MemwarnMetric(
        "memwarn_trim_steps_total", .counter, labels: ["outcome"],
        help: "The proactive trim's changes of a consumer's ceiling: lowered, backed_off (refills rose), lifted; 0 while the trim is off.")
}

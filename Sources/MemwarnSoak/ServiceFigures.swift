/// What a soak read from the service itself while it ran: through memwarn's control endpoint
/// (`status`, once a second) when the service links memwarn and serves one, and from its
/// `/metrics` when it has them.
public struct ServiceFigures: Sendable, Hashable, Codable {
    /// Whether a control endpoint of a process in the service's cgroup answered: the service
    /// links memwarn (and adds its `ControlService`).
    public var linksMemwarn = false
    /// Releases the service's coordinator made (at a level above normal).
    public var releases = 0
    /// Bytes freed by tier and by consumer, the service's own count.
    public var releasedBytesByTier: [String: Int] = [:]
    public var releasedBytesByConsumer: [String: Int] = [:]
    /// Forecast warnings raised, and those whose growth did not come.
    public var forecastWarnings = 0
    public var falseForecasts = 0
    /// Seconds the service's monitor found memory exhausted (polled once a second).
    public var exhaustedSeconds = 0.0
    /// The floor samples (``MemoryTrend``).
    public var floorSamples: [MemoryTrend.Sample] = []
    /// Whether `/metrics` answered.
    public var metricsScraped = false
    /// The service's load-shedding counters from `/metrics` (names ending in `_shed_total`, or
    /// those given with `--shed-counter`), summed over their labels, at the last scrape.
    public var shedCounters: [String: Double] = [:]

    public init() {}

    /// Load shed: the shedding counters summed, or `nil` when none was read.
    public var shed: Double? { shedCounters.isEmpty ? nil : shedCounters.values.reduce(0, +) }
}

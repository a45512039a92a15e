import MemwarnSystem

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

    /// The service's release counters at each answer of its endpoint, for what survival cost.
    public var releaseSamples: [ReleaseSample] = []
    /// The request counters (`--request-counter`, or names ending in `_requests_total`) summed,
    /// at each scrape of `/metrics` that had one.
    public var requestSamples: [CounterSample] = []
    /// The request counters' names, at the last scrape that had one.
    public var requestCounterNames: [String] = []
    /// The cache lookups (names ending in `_cache_hits_total` and `_cache_misses_total`, each
    /// summed), at each scrape of `/metrics` that had both.
    public var cacheSamples: [CacheSample] = []

    /// The consumers as the endpoint last answered: what each held and, when it says, what of
    /// that was in use (``/MemwarnRelease/MemoryConsumer/inUseBytes``).
    public var lastConsumers: [ConsumerFigure] = []
    /// The answer at which the consumers said the most was in use, summed (`nil` while none
    /// said anything was).
    public var peakInUse: InUsePeak?

    /// One consumer at one answer of the endpoint.
    public struct ConsumerFigure: Sendable, Hashable, Codable {
        public var name: String
        public var tier: String
        public var footprintBytes: Int
        /// `nil` when the consumer does not say.
        public var inUseBytes: Int?
    }

    /// The most memory in use the consumers reported, and who held it.
    public struct InUsePeak: Sendable, Hashable, Codable {
        /// Seconds since the run started.
        public var seconds: Double
        /// In use, summed over the consumers that say.
        public var bytes: Int
        /// Each consumer's part, the most first (those with none in use left out).
        public var byConsumer: [String: Int]

        /// `renders 38.0 MiB, pool 2.0 MiB`, the most first.
        public var holders: String {
            byConsumer.sorted { ($0.value, $1.key) > ($1.value, $0.key) }.prefix(3).map { "\($0.key) \(ByteSize.describe(UInt64($0.value)))" }
                .joined(separator: ", ")
        }
    }

    /// Memory in use at the last answer, summed over the consumers that say; `nil` when none says.
    public var lastInUseBytes: Int? {
        let said = lastConsumers.compactMap(\.inUseBytes)
        return said.isEmpty ? nil : said.lazy.saturatingSum()
    }

    /// The service's own release counters at one answer of its endpoint.
    public struct ReleaseSample: Sendable, Hashable, Codable {
        /// Seconds since the run started.
        public var seconds: Double
        public var releases: Int
        /// Bytes freed, every tier.
        public var freedBytes: Int
        /// Seconds spent releasing (0 from a service whose endpoint predates the figure).
        public var releaseSeconds: Double
    }

    /// A counter's value at one scrape.
    public struct CounterSample: Sendable, Hashable, Codable {
        public var seconds: Double
        public var value: Double
    }

    /// A cache's hit and miss counters at one scrape.
    public struct CacheSample: Sendable, Hashable, Codable {
        public var seconds: Double
        public var hits: Double
        public var misses: Double
    }

    public init() {}

    /// Load shed: the shedding counters summed, or `nil` when none was read.
    public var shed: Double? { shedCounters.isEmpty ? nil : shedCounters.values.reduce(0, +) }
}

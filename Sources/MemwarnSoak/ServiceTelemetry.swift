import MemwarnSystem

/// What a soak read from the service itself while it ran: through memwarn's control endpoint
/// (`status`, once a second) when the service links memwarn and serves one, and from its
/// `/metrics` when it has them.
package struct ServiceTelemetry: Sendable, Hashable, Codable {
    /// Whether a control endpoint of a process in the service's cgroup answered: the service
    /// links memwarn (and adds its `ControlService`).
    package var linksMemwarn = false
    /// Releases the service's coordinator made (at a level above normal).
    package var releases = 0
    /// Bytes freed by tier and by consumer, the service's own count.
    package var releasedBytesByTier: [String: Int] = [:]
    package var releasedBytesByConsumer: [String: Int] = [:]
    /// Forecast warnings raised, and those whose growth did not come.
    package var forecastWarnings = 0
    package var falseForecasts = 0
    /// Seconds the service's monitor found memory exhausted (polled once a second).
    package var exhaustedSeconds = 0.0
    /// The floor samples (``MemoryTrend``).
    package var floorSamples: [MemoryTrend.Sample] = []
    /// When (seconds since the run started) a poll gave no floor sample because anonymous memory
    /// fell while the service answered (``MemoryTrend/Sample/paired(seconds:anonymousBefore:anonymousAfter:footprintBytes:heapFloorBytes:limitBytes:)``).
    package var floorSamplesLeftOut: [Double] = []
    /// Whether `/metrics` answered.
    package var metricsScraped = false
    /// The service's load-shedding counters from `/metrics` (names ending in `_shed_total`, or
    /// those given with `--shed-counter`), summed over their labels, at the last scrape: as the
    /// page gave them (+Inf when a counter's samples sum past what a `Double` holds), checked
    /// when they make a figure (``shed``).
    package var shedCounters: [String: Double] = [:]

    /// The service's release counters at each answer of its endpoint, for what survival cost.
    package var releaseSamples: [ReleaseSample] = []
    /// The request counters (`--request-counter`, or names ending in `_requests_total`) summed,
    /// at each scrape of `/metrics` that had one: as the page gave them, as ``shedCounters``;
    /// ``SurvivalCost/of(_:from:until:)`` checks those it reads.
    package var requestSamples: [CounterSample] = []
    /// The request counters' names, at the last scrape that had one.
    package var requestCounterNames: [String] = []
    /// The cache lookups (names ending in `_cache_hits_total` and `_cache_misses_total`, each
    /// summed), at each scrape of `/metrics` that had both.
    package var cacheSamples: [CacheSample] = []

    /// The consumers as the endpoint last answered: what each held and, when it says, what of
    /// that was in use (``/MemwarnRelease/MemoryConsumer/inUseBytes``).
    package var lastConsumers: [Consumer] = []
    /// The answer at which the consumers said the most was in use, summed (`nil` while none
    /// said anything was).
    package var peakInUse: InUsePeak?

    /// One consumer at one answer of the endpoint.
    package struct Consumer: Sendable, Hashable, Codable {
        package var name: String
        package var tier: String
        package var footprintBytes: Int
        /// `nil` when the consumer does not say.
        package var inUseBytes: Int?
    }

    /// The most memory in use the consumers reported, and who held it.
    package struct InUsePeak: Sendable, Hashable, Codable {
        /// Seconds since the run started.
        package var seconds: Double
        /// In use, summed over the consumers that say.
        package var bytes: Int
        /// Each consumer's part, the most first (those with none in use left out).
        package var byConsumer: [String: Int]

        /// `renders 38.0 MiB, pool 2.0 MiB`, the most first.
        package var holders: String {
            byConsumer.sorted { ($0.value, $1.key) > ($1.value, $0.key) }.prefix(3).map { "\($0.key) \(ByteSize.describe(UInt64($0.value)))" }
                .joined(separator: ", ")
        }
    }

    /// Memory in use at the last answer, summed over the consumers that say; `nil` when none says.
    package var lastInUseBytes: Int? {
        let said = lastConsumers.compactMap(\.inUseBytes)
        return said.isEmpty ? nil : said.lazy.saturatingSum()
    }

    /// The service's own release counters at one answer of its endpoint.
    package struct ReleaseSample: Sendable, Hashable, Codable {
        /// Seconds since the run started.
        package var seconds: Double
        package var releases: Int
        /// Bytes freed, every tier.
        package var freedBytes: Int
        /// Seconds spent releasing (0 from a service whose endpoint predates the figure).
        package var releaseSeconds: Double
    }

    /// A counter's value at one scrape.
    package struct CounterSample: Sendable, Hashable, Codable {
        package var seconds: Double
        package var value: Double
    }

    /// A cache's hit and miss counters at one scrape.
    package struct CacheSample: Sendable, Hashable, Codable {
        package var seconds: Double
        package var hits: Double
        package var misses: Double
    }

    package init() {}

    /// Load shed: the shedding counters summed and checked (a sum past 2^53, or of counters below
    /// 0, is no count: ``CounterSum``), or `nil` when none was read.
    package var shed: CounterSum? { shedCounters.isEmpty ? nil : CounterSum(shedCounters.values) }
}

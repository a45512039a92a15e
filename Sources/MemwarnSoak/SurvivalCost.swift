import Foundation

/// What surviving a limit cost a soaked service while it was loaded: how often it released and
/// how much, how long its threads spent releasing, the load it served, its cache's misses, and
/// whether it was thrashing — releasing every second for a minute or more, its caches rebuilt
/// only to be dropped.
///
/// The figures come from the service itself (its control endpoint's counters, its `/metrics`),
/// over the loaded span: from ready until the soak began to stop it. A figure the service does
/// not report is `nil`, never 0.
package struct SurvivalCost: Sendable, Hashable, Codable {
    /// Seconds the figures cover (between the first and the last reading of the loaded span).
    package var seconds = 0.0
    /// Releases a second (the service's coordinator, at warning or critical).
    package var releasesPerSecond: Double?
    /// Bytes released a minute, every tier.
    package var releasedBytesPerMinute: Double?
    /// The share of the time the service spent releasing (0…1), from its own durations.
    package var releasingShare: Double?
    /// Requests a second, from its request counters (`--request-counter`, or `*_requests_total`).
    package var requestsPerSecond: Double?
    /// Misses over lookups (0…1), from its `*_cache_hits_total` and `*_cache_misses_total`.
    package var cacheMissRate: Double?
    /// The longest stretch in which the service released at least once every second, when it
    /// lasted ``thrashingAfter`` or more.
    package var thrashing: Thrashing?

    /// A stretch of releases every second.
    package struct Thrashing: Sendable, Hashable, Codable {
        /// When it began, in seconds after the service was ready.
        package var fromSeconds: Double
        /// How long it lasted.
        package var seconds: Double
        /// Releases a second within it.
        package var releasesPerSecond: Double
    }

    /// How long releases every second must go on to be thrashing.
    package static let thrashingAfter = 60.0

    package init() {}

    /// Whether survival was costly: thrashing.
    package var isThrashing: Bool { thrashing != nil }

    /// The cost of the figures read between `ready` and `stop` (seconds after the run's start).
    ///
    /// - Parameters:
    ///   - figures: what the service reported while it ran.
    ///   - ready: when it was ready.
    ///   - stop: when the soak began to stop it.
    /// - Returns: the cost; each figure `nil` when the service did not report what it needs.
    package static func of(_ figures: ServiceTelemetry, from ready: Double, until stop: Double) -> SurvivalCost {
        var cost = SurvivalCost()
        let releases = figures.releaseSamples.filter { $0.seconds >= ready && $0.seconds <= stop }
        if let first = releases.first, let last = releases.last, last.seconds > first.seconds {
            let span = last.seconds - first.seconds
            cost.seconds = span
            cost.releasesPerSecond = Double(max(0, last.releases - first.releases)) / span
            cost.releasedBytesPerMinute = max(0, Double(last.freedBytes) - Double(first.freedBytes)) / span * 60
            cost.releasingShare = min(1, max(0, last.releaseSeconds - first.releaseSeconds) / span)
            cost.thrashing = thrashing(in: releases, ready: ready)
        }
        let requests = figures.requestSamples.filter { $0.seconds >= ready && $0.seconds <= stop }
        if let first = requests.first, let last = requests.last, last.seconds > first.seconds, last.value >= first.value {
            cost.requestsPerSecond = (last.value - first.value) / (last.seconds - first.seconds)
        }
        let lookups = figures.cacheSamples.filter { $0.seconds >= ready && $0.seconds <= stop }
        if let first = lookups.first, let last = lookups.last {
            let (hits, misses) = (last.hits - first.hits, last.misses - first.misses)
            if hits >= 0, misses >= 0, hits + misses > 0 { cost.cacheMissRate = misses / (hits + misses) }
        }
        return cost
    }

    /// The longest run of readings in which each interval saw at least one release a whole
    /// second elapsed, when it lasted ``thrashingAfter`` or more.
    static func thrashing(in samples: [ServiceTelemetry.ReleaseSample], ready: Double) -> Thrashing? {
        var best: Thrashing?
        var start: ServiceTelemetry.ReleaseSample?
        var previous: ServiceTelemetry.ReleaseSample?
        func close(at end: ServiceTelemetry.ReleaseSample?) {
            guard let begun = start, let end, end.seconds - begun.seconds >= thrashingAfter else { return }
            let span = end.seconds - begun.seconds
            if span > best?.seconds ?? 0 {
                best = Thrashing(fromSeconds: begun.seconds - ready, seconds: span, releasesPerSecond: Double(end.releases - begun.releases) / span)
            }
        }
        for sample in samples {
            defer { previous = sample }
            guard let before = previous else { continue }
            let everySecond = sample.releases - before.releases >= max(1, Int((sample.seconds - before.seconds).rounded(.down)))
            if everySecond {
                if start == nil { start = before }
            } else {
                close(at: before)
                start = nil
            }
        }
        close(at: previous)
        return best
    }

    /// The cost in the report's words, a phrase a figure.
    package var phrases: [String] {
        var phrases: [String] = []
        if let rate = releasesPerSecond { phrases.append(String(format: "%.2f releases/s", rate)) }
        if let bytes = releasedBytesPerMinute { phrases.append("\(mebibytes(bytes))/min released") }
        if let share = releasingShare { phrases.append(String(format: "%.1f %% of the time releasing", share * 100)) }
        if let requests = requestsPerSecond { phrases.append(String(format: "%.0f requests/s", requests)) }
        if let miss = cacheMissRate { phrases.append(String(format: "cache miss rate %.1f %%", miss * 100)) }
        if let thrashing { phrases.append(thrashing.description) }
        return phrases
    }
}

extension SurvivalCost.Thrashing: CustomStringConvertible {
    /// `thrashing: releases every second for 95 s (from 12 s), 29.1/s`.
    package var description: String {
        String(format: "THRASHING: releases every second for %.0f s (from %.0f s after ready), %.1f/s", seconds, fromSeconds, releasesPerSecond)
    }
}

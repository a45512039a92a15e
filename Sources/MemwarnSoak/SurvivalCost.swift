import Foundation

/// What surviving a limit cost a soaked service while it was loaded: how often it released and
/// how much, how long its threads spent releasing, the load it served, its cache's misses, and
/// whether it was thrashing — releasing every second for a sustained stretch (half the loaded
/// span, a minute at most: ``thrashingWindow(loadedSeconds:)``), its caches rebuilt only to be
/// dropped.
///
/// The figures come from the service itself (its control endpoint's counters, its `/metrics`),
/// over the loaded span: from ready until the soak began to stop it. A figure the service does
/// not report is `nil`, never 0. Nor is one made of counters that are no count: request or cache
/// counters past 2^53 or below 0 (``CounterSum``) give the reason instead, and an interval in
/// which the release counters went backwards (the service's count restarted, or wrapped past
/// `Int.max`) is left out, never subtracted.
package struct SurvivalCost: Sendable, Hashable, Codable {
    /// Seconds the figures cover (between the first and the last reading of the loaded span,
    /// less the intervals left out, ``releaseIntervalsLeftOut``).
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
    /// lasted ``thrashingWindowSeconds`` or more.
    package var thrashing: Thrashing?
    /// Seconds the service was loaded: from ready until the soak began to stop it.
    package var loadedSeconds = 0.0
    /// How long releases every second must last in this run to be thrashing
    /// (``thrashingWindow(loadedSeconds:)``); `nil` when the run was loaded too briefly to judge
    /// thrashing (under twice ``shortestThrashingWindow``): it says nothing either way, and no
    /// limit is recommended from it.
    package var thrashingWindowSeconds: Double?
    /// Why there is no ``requestsPerSecond`` though the service exported request counters: they
    /// were no count (`the service's request counters sum to more than 2^53`).
    package var requestsUnreadable: String?
    /// Why there is no ``cacheMissRate`` though the service exported cache counters.
    package var cacheLookupsUnreadable: String?
    /// Intervals between two answers of the service's endpoint in which a release counter went
    /// backwards: left out of the release figures and of the thrashing scan.
    package var releaseIntervalsLeftOut = 0

    /// A stretch of releases every second.
    package struct Thrashing: Sendable, Hashable, Codable {
        /// When it began, in seconds after the service was ready.
        package var fromSeconds: Double
        /// How long it lasted.
        package var seconds: Double
        /// Releases a second within it.
        package var releasesPerSecond: Double
    }

    /// The longest a thrashing window is: releases every second for a minute are thrashing
    /// however long the run.
    package static let longestThrashingWindow = 60.0

    /// The shortest a thrashing window is. Releases every second for less are a burst — the caches
    /// filling for the first time, a spike of load — as likely as a limit too tight.
    package static let shortestThrashingWindow = 20.0

    /// The window thrashing is judged on in a run loaded `loadedSeconds`: half of it, at most
    /// ``longestThrashingWindow``; `nil` when that is under ``shortestThrashingWindow`` (a run
    /// loaded under 40 s is too short to judge).
    ///
    /// Half, because a service reaches its limit only once its caches have filled, which takes a
    /// part of the run; what follows must be mostly releases every second to be called thrashing,
    /// and a run of its default 60 s, loaded a minute, judges on 30 s. From two minutes on, the
    /// window is a minute: a longer soak does not make a shorter stretch thrashing.
    ///
    /// - Parameter loadedSeconds: from ready until the soak began to stop the service.
    /// - Returns: the window in seconds, or `nil`: too short to judge.
    package static func thrashingWindow(loadedSeconds: Double) -> Double? {
        let window = min(longestThrashingWindow, loadedSeconds / 2)
        return window >= shortestThrashingWindow ? window : nil
    }

    /// Whether the run was loaded long enough to judge thrashing (``thrashingWindowSeconds``).
    package var judgesThrashing: Bool { thrashingWindowSeconds != nil }

    package init() {}

    /// Whether survival was costly: thrashing.
    package var isThrashing: Bool { thrashing != nil }

    /// Whether the service reported releases but no interval of them could be counted: its
    /// counters went backwards between every two answers.
    package var releasesUnreadable: Bool { releasesPerSecond == nil && releaseIntervalsLeftOut > 0 }

    /// The cost of the figures read between `ready` and `stop` (seconds after the run's start).
    ///
    /// - Parameters:
    ///   - figures: what the service reported while it ran.
    ///   - ready: when it was ready.
    ///   - stop: when the soak began to stop it.
    /// - Returns: the cost; each figure `nil` when the service did not report what it needs, or
    ///   what it reported was no count (with the reason).
    package static func of(_ figures: ServiceTelemetry, from ready: Double, until stop: Double) -> SurvivalCost {
        var cost = SurvivalCost()
        cost.loadedSeconds = max(0, stop - ready)
        cost.thrashingWindowSeconds = thrashingWindow(loadedSeconds: cost.loadedSeconds)
        let releases = figures.releaseSamples.filter { $0.seconds >= ready && $0.seconds <= stop }
        let rises = zip(releases, releases.dropFirst()).map { ReleaseRise(from: $0, to: $1) }
        let counted = rises.compactMap { $0 }
        cost.releaseIntervalsLeftOut = rises.count - counted.count
        let span = counted.reduce(0) { $0 + $1.seconds }
        if span > 0 {
            cost.seconds = span
            cost.releasesPerSecond = counted.reduce(0) { $0 + $1.releases } / span
            cost.releasedBytesPerMinute = counted.reduce(0) { $0 + $1.freedBytes } / span * 60
            cost.releasingShare = min(1, counted.reduce(0) { $0 + $1.releaseSeconds } / span)
            cost.thrashing = cost.thrashingWindowSeconds.flatMap { thrashing(in: releases, ready: ready, window: $0) }
        }
        let requests = figures.requestSamples.filter { $0.seconds >= ready && $0.seconds <= stop }
        if let first = requests.first, let last = requests.last, last.seconds > first.seconds {
            let (from, to) = (CounterSum([first.value]), CounterSum([last.value]))
            if let from = from.count, let to = to.count {
                // A counter that went back (the service restarted its count) gives no throughput.
                if to >= from { cost.requestsPerSecond = (to - from) / (last.seconds - first.seconds) }
            } else {
                cost.requestsUnreadable = from.reason("request counters") ?? to.reason("request counters")
            }
        }
        let lookups = figures.cacheSamples.filter { $0.seconds >= ready && $0.seconds <= stop }
        if let first = lookups.first, let last = lookups.last {
            let sums = [first.hits, first.misses, last.hits, last.misses].map { CounterSum([$0]) }
            if let reason = sums.lazy.compactMap({ $0.reason("cache counters") }).first {
                cost.cacheLookupsUnreadable = reason
            } else {
                // Counts of at most 2^53 each: their differences and sum are finite.
                let (hits, misses) = (last.hits - first.hits, last.misses - first.misses)
                if hits >= 0, misses >= 0, hits + misses > 0 { cost.cacheMissRate = misses / (hits + misses) }
            }
        }
        return cost
    }

    /// What the service's release counters rose by from one answer of its endpoint to the next,
    /// or `nil` when one went backwards (its count restarted, or wrapped past `Int.max` to
    /// `Int.min`): the interval is then left out, never subtracted.
    struct ReleaseRise {
        /// Seconds between the two answers.
        var seconds: Double
        var releases: Double
        var freedBytes: Double
        /// Seconds spent releasing in between.
        var releaseSeconds: Double

        init?(from before: ServiceTelemetry.ReleaseSample, to after: ServiceTelemetry.ReleaseSample) {
            let releaseSeconds = after.releaseSeconds - before.releaseSeconds
            guard after.releases >= before.releases, after.freedBytes >= before.freedBytes, releaseSeconds.isFinite, releaseSeconds >= 0 else {
                return nil
            }
            seconds = after.seconds - before.seconds
            releases = Self.rise(from: before.releases, to: after.releases)
            freedBytes = Self.rise(from: before.freedBytes, to: after.freedBytes)
            self.releaseSeconds = releaseSeconds
        }

        /// `after - before` (`after` the larger), exact while it fits in an `Int` (near
        /// `Int.max` a `Double` holds no count exactly), never an overflow.
        private static func rise(from before: Int, to after: Int) -> Double {
            let (difference, overflow) = after.subtractingReportingOverflow(before)
            return overflow ? Double(after) - Double(before) : Double(difference)
        }
    }

    /// The longest run of readings in which each interval saw at least one release a whole
    /// second elapsed, when it lasted `window` seconds or more. An interval whose counters went
    /// backwards (``ReleaseRise``) ends a run.
    static func thrashing(in samples: [ServiceTelemetry.ReleaseSample], ready: Double, window: Double) -> Thrashing? {
        var best: Thrashing?
        var stretch: (from: Double, to: Double, releases: Double)?
        func close() {
            guard let stretch, stretch.to - stretch.from >= window, stretch.to - stretch.from > best?.seconds ?? 0 else { return }
            let span = stretch.to - stretch.from
            best = Thrashing(fromSeconds: stretch.from - ready, seconds: span, releasesPerSecond: stretch.releases / span)
        }
        for (before, after) in zip(samples, samples.dropFirst()) {
            if let rise = ReleaseRise(from: before, to: after), rise.releases >= max(1, rise.seconds.rounded(.down)) {
                stretch = (stretch?.from ?? before.seconds, after.seconds, (stretch?.releases ?? 0) + rise.releases)
            } else {
                close()
                stretch = nil
            }
        }
        close()
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
        if let thrashing, let window = thrashingWindowSeconds { phrases.append(thrashing.described(window: window)) }
        if releasesPerSecond != nil, !judgesThrashing {
            phrases.append(
                String(format: "loaded %.0f s: too short to judge thrashing (%.0f s or more needed)", loadedSeconds, 2 * Self.shortestThrashingWindow))
        }
        if releaseIntervalsLeftOut > 0 {
            let intervals = "\(releaseIntervalsLeftOut) interval\(releaseIntervalsLeftOut == 1 ? "" : "s")"
            phrases.append("releases went backwards between polls (\(intervals): the service's count restarted or wrapped): not counted")
        }
        if let reason = requestsUnreadable { phrases.append("throughput unreadable: \(reason)") }
        if let reason = cacheLookupsUnreadable { phrases.append("cache miss rate unreadable: \(reason)") }
        return phrases
    }
}

extension SurvivalCost.Thrashing {
    /// `THRASHING: releases every second for 95 s (from 12 s after ready; 60 s window), 29.1/s`,
    /// judged on a window of `window` seconds (the run's ``SurvivalCost/thrashingWindowSeconds``).
    package func described(window: Double) -> String {
        String(
            format: "THRASHING: releases every second for %.0f s (from %.0f s after ready; %.0f s window), %.1f/s", seconds, fromSeconds, window,
            releasesPerSecond)
    }
}

import Foundation

/// What a soak says about the memory a service cannot give back: its floor, and whether the floor
/// rises — steady, warming up, leaking (at what rate, how sure), retained by the allocator, or
/// rising in a way this soak cannot yet tell from either.
///
/// The method (also in the README):
/// 1. **Floor samples.** Once a second the soak reads the cgroup's anonymous memory (v1
///    `memory.stat` `total_rss`, v2 `anon`: page cache is the kernel's to reclaim, not the
///    service's floor) and, when the service links memwarn, what its consumers hold (the
///    control endpoint's `status`). A floor sample is the first less the second: memory no
///    release tier could give back at that moment. The anonymous memory is read on both sides
///    of the status: a poll in which it fell by a release's size gives no sample
///    (``Sample/paired(seconds:anonymousBefore:anonymousAfter:footprintBytes:heapFloorBytes:limitBytes:)``).
///    A service without memwarn has no consumers: its floor samples are its anonymous memory.
/// 2. **Troughs.** Over the loaded service — from ready until the soak begins to stop it — the
///    lowest floor sample in each whole window of `max(5 s, span / 40)`, after the first: the
///    memory that stayed however much was released.
/// 3. **Trend.** The Mann–Kendall test for a rising trend over the troughs (its one-sided
///    confidence), and Sen's slope (the median of the slopes between every two troughs) as the
///    rate. A rise counts when the confidence is at least 99 % and the rate over the soak
///    comes to at least `max(2 MiB, 1 % of the limit)`: a slower leak is reported as not visible
///    in this soak (``smallestVisibleRateBytesPerMinute``).
/// 4. **Verdict.** No rise: *steady*. A rise whose second half climbs at under a third of the
///    first half's rate, or does not climb as surely on its own (under 99 % confidence):
///    *warming up* (caches of the runtime, pools reaching their size; a short soak cannot tell
///    more, and the summary says so). A rise
///    in the floor whose heap in use (the service's own figure, less its consumers) does not rise
///    with it — under a third of the rate: *retained by the allocator* (freed memory malloc
///    keeps; not a leak). A rise whose second half climbs at under half the first half's rate
///    (it slows, as a cache filling to its size does, but has not flattened), or whose second
///    half on its own rises less than the smallest rise that counts (a rise barely seen over the
///    whole soak): *cannot tell yet* — a cache filling to its cap and a leak look alike until the
///    curve flattens or the line holds; soak longer. Otherwise — the rate holds through the second
///    half, which on its own rises surely and visibly: *leaking*, with the rate.
/// 5. **What cannot be seen.** Without the consumers' footprint (no control endpoint answered),
///    a floor sample is the whole anonymous memory. When that memory falls while the cgroup is at
///    warning or critical (``fallsUnderPressure(_:levelChanges:limitBytes:)``: something releases
///    under pressure, as memwarn's release loop does), the troughs are where the releases left
///    the caches, not the floor: a leak shrinks the caches and the troughs stay flat. The verdict
///    is then *unknown: no control endpoint*, never *steady*.
package struct MemoryTrend: Sendable, Hashable, Codable {
    /// The verdict.
    package enum Verdict: String, Sendable, Hashable, Codable {
        case steady
        case warmingUp = "warming up"
        case leaking
        case retainedByAllocator = "retained by the allocator"
        /// A rise that slowed without flattening, or whose second half alone is too small to see:
        /// a cache filling to its cap and a leak cannot be told apart yet (see the method's step 4).
        case cannotTellYet = "cannot tell yet"
        /// Fewer than six troughs, or a soak under 20 s: nothing can be said.
        case tooShort = "too short to tell"
        /// No control endpoint answered and the anonymous memory fell under pressure: the caches
        /// cannot be told from the floor (see the method's step 5).
        case unknownNoEndpoint = "unknown: no control endpoint"
    }

    /// The share of the first half's rate the second half must keep for a rise to be a leak: a
    /// leak's rate holds (its halves differ by the troughs' noise alone), a cache filling to its
    /// size slows as it fills. Under it, but over a third (a warm-up seen flattening), the soak
    /// cannot tell the two apart yet.
    package static let leakHoldsAt = 0.5

    /// How many falls under pressure make the floor unknowable from outside.
    package static let fallsThatHideTheFloor = 2

    /// One trough: the lowest floor sample of its window.
    package struct Point: Sendable, Hashable, Codable {
        package var seconds: Double
        package var bytes: UInt64

        package init(seconds: Double, bytes: UInt64) {
            self.seconds = seconds
            self.bytes = bytes
        }
    }

    package var verdict: Verdict
    /// The floor: the median of the last quarter of the troughs.
    package var floorBytes: UInt64?
    /// The floor of heap in use less the consumers' footprint, when the service reports its heap.
    package var heapFloorBytes: UInt64?
    /// Sen's slope over the troughs, in bytes a minute.
    package var rateBytesPerMinute: Double
    /// The Mann–Kendall test's one-sided confidence that the troughs rise (0…1).
    package var confidence: Double
    /// Sen's slope over the first half of the troughs alone, in bytes a minute (0 when the trend
    /// was not judged): what the second half's rate is compared with.
    package var firstHalfRateBytesPerMinute = 0.0
    /// Sen's slope and the Mann–Kendall confidence over the second half of the troughs alone
    /// (0 when the trend was not judged).
    package var secondHalfRateBytesPerMinute = 0.0
    package var secondHalfConfidence = 0.0
    /// The slowest rise this soak could show, in bytes a minute.
    package var smallestVisibleRateBytesPerMinute: Double
    /// What the floor samples are: `anonymous memory less the consumers' footprint`, or `anonymous memory`.
    package var basis: String
    /// The troughs, in time order (the plot marks them).
    package var troughs: [Point]
    /// When no control endpoint answered: how many times the anonymous memory fell by at least
    /// ``smallestFall(limitBytes:)`` from one floor sample to the next while the cgroup was at
    /// warning or critical. `nil` when the consumers' footprint was known.
    package var fallsUnderPressure: Int?
    /// Polls of the loaded service that gave no floor sample: anonymous memory fell by at least
    /// ``smallestFall(limitBytes:)`` while the service answered, so its footprint and the memory
    /// were of different moments (``Sample/paired(seconds:anonymousBefore:anonymousAfter:footprintBytes:heapFloorBytes:limitBytes:)``).
    package var samplesLeftOut = 0

    /// One line: `steady (floor 61.2 MiB)`, `leaking 2.1 MiB/min (confidence 99.9 %; floor 80.3 MiB)`.
    package var summary: String {
        let floor = floorBytes.map { "floor \(mebibytes(Double($0)))" } ?? "floor unknown"
        let rate = "\(String(format: "%.2f", rateBytesPerMinute / 1_048_576)) MiB/min"
        switch verdict {
        case .steady:
            return
                "steady (\(floor); a rise under \(String(format: "%.2f", smallestVisibleRateBytesPerMinute / 1_048_576)) MiB/min would not show in this soak)"
        case .warmingUp:
            let late = String(format: "%.2f", secondHalfRateBytesPerMinute / 1_048_576)
            return secondHalfRateBytesPerMinute < firstHalfRateBytesPerMinute / 3
                ? "warming up (troughs rose \(rate), the second half \(late) MiB/min: flattening; \(floor))"
                : "warming up (troughs rose \(rate); the second half, \(late) MiB/min, does not clearly rise on its own: soak longer to tell a warm-up from a leak; \(floor))"
        case .leaking: return "leaking \(rate) (confidence \(percent(confidence)); \(floor))"
        case .cannotTellYet:
            let halves = String(
                format: "the first half %.2f, the second %.2f MiB/min", firstHalfRateBytesPerMinute / 1_048_576, secondHalfRateBytesPerMinute / 1_048_576)
            let why =
                secondHalfRateBytesPerMinute < firstHalfRateBytesPerMinute * Self.leakHoldsAt
                ? "\(halves): slowing, not yet flat"
                : "\(halves), too little in half the soak to see"
            return
                "cannot tell yet (troughs rose \(rate); \(why): a cache filling to its size flattens, a leak holds its rate; soak longer to tell; \(floor))"
        case .retainedByAllocator:
            return
                "retained by the allocator (the floor rose \(rate), heap in use did not; \(floor)\(heapFloorBytes.map { ", heap \(mebibytes(Double($0)))" } ?? ""))"
        case .tooShort: return "too short to tell (\(troughs.count) troughs; \(floor))"
        case .unknownNoEndpoint:
            return
                "unknown: no control endpoint answered, and the anonymous memory fell \(fallsUnderPressure ?? 0) times at warning or critical "
                + "(something releases under pressure): without the consumers' footprint the caches cannot be told from the floor, "
                + "and a leak would only shrink them; serve memwarn's control endpoint (ControlService) for a verdict"
        }
    }

    /// A floor sample: anonymous memory, less what the consumers held, with the heap in use when known.
    package struct Sample: Sendable, Hashable, Codable {
        package var seconds: Double
        package var floorBytes: UInt64
        package var heapFloorBytes: UInt64?

        package init(seconds: Double, floorBytes: UInt64, heapFloorBytes: UInt64?) {
            self.seconds = seconds
            self.floorBytes = floorBytes
            self.heapFloorBytes = heapFloorBytes
        }
    }

    /// Analyses the floor samples of a soak that ran `spanSeconds` under `limitBytes`.
    ///
    /// - Parameters:
    ///   - samples: floor samples, in time order.
    ///   - spanSeconds: the soak's length.
    ///   - limitBytes: its limit (the smallest rise that counts is 1 % of it, at least 2 MiB).
    ///   - basis: what the samples are, for the report.
    ///   - fallsUnderPressure: when no control endpoint answered, the falls of the samples under
    ///     pressure (``fallsUnderPressure(_:levelChanges:limitBytes:)``); `nil` when the
    ///     consumers' footprint was subtracted.
    /// - Returns: the trend.
    /// - Complexity: O(t²) for t troughs (at most about 40).
    package static func analyse(
        _ samples: [Sample], spanSeconds: Double, limitBytes: UInt64, basis: String, fallsUnderPressure: Int? = nil
    ) -> MemoryTrend {
        let window = max(5, spanSeconds / 40)
        let troughs = troughs(of: samples.map { Point(seconds: $0.seconds, bytes: $0.floorBytes) }, window: window, span: spanSeconds)
        // The heap's figures come with the service's answers: not before its endpoint listens.
        let heapPoints = samples.compactMap { sample in sample.heapFloorBytes.map { Point(seconds: sample.seconds, bytes: $0) } }
        let heapTroughs = heapPoints.count * 5 >= samples.count * 4 ? Self.troughs(of: heapPoints, window: window, span: spanSeconds) : []
        let smallestRise = max(2.0 * 1_048_576, Double(limitBytes) / 100)
        // The rise is measured between the first and the last trough: the slowest visible rate is over that time.
        let span = max(1, troughs.count >= 2 ? (troughs.last?.seconds ?? 0) - (troughs.first?.seconds ?? 0) : spanSeconds)
        var trend = MemoryTrend(
            verdict: .tooShort, floorBytes: lastQuarterMedian(troughs), heapFloorBytes: lastQuarterMedian(heapTroughs),
            rateBytesPerMinute: 0, confidence: 0, smallestVisibleRateBytesPerMinute: smallestRise / span * 60,
            basis: basis, troughs: troughs, fallsUnderPressure: fallsUnderPressure)
        guard troughs.count >= 6, spanSeconds >= 20 else { return trend }
        let slope = senSlope(troughs)
        trend.rateBytesPerMinute = slope * 60
        trend.confidence = risingConfidence(troughs)
        if let falls = fallsUnderPressure, falls >= fallsThatHideTheFloor {
            // The troughs are where the releases left the caches: no floor, no verdict on it.
            trend.verdict = .unknownNoEndpoint
            trend.floorBytes = nil
            return trend
        }
        let observedSpan = (troughs.last?.seconds ?? 0) - (troughs.first?.seconds ?? 0)
        guard trend.confidence >= 0.99, slope * observedSpan >= smallestRise else {
            trend.verdict = .steady
            return trend
        }
        let half = troughs.count / 2
        let early = senSlope(Array(troughs[..<half]))
        let late = senSlope(Array(troughs[half...]))
        trend.firstHalfRateBytesPerMinute = early * 60
        trend.secondHalfRateBytesPerMinute = late * 60
        trend.secondHalfConfidence = risingConfidence(Array(troughs[half...]))
        let secondHalfSpan = (troughs.last?.seconds ?? 0) - troughs[half].seconds
        // A leak keeps rising: its second half, on its own, rises as surely as the whole, at
        // about its rate, and by as much as a rise must to count.
        if late < early / 3 || trend.secondHalfConfidence < 0.99 {
            trend.verdict = .warmingUp
        } else if heapTroughs.count >= 6, senSlope(heapTroughs) < slope / 3 {
            trend.verdict = .retainedByAllocator
        } else if late < early * leakHoldsAt || late * secondHalfSpan < smallestRise {
            trend.verdict = .cannotTellYet
        } else {
            trend.verdict = .leaking
        }
        return trend
    }

    /// The smallest fall that counts as a release seen from outside: 1 % of the limit, at least 1 MiB.
    package static func smallestFall(limitBytes: UInt64) -> UInt64 { max(1 << 20, limitBytes / 100) }

    /// How many times the samples fell by at least ``smallestFall(limitBytes:)`` from one to the
    /// next while the cgroup was at warning or critical (at the first of the two, or at a level
    /// change between them): releases under pressure, as seen from outside.
    ///
    /// - Parameters:
    ///   - samples: floor samples, in time order.
    ///   - levelChanges: the soak's own monitor's level changes, on the samples' clock.
    ///   - limitBytes: the run's limit.
    /// - Returns: the number of falls.
    package static func fallsUnderPressure(_ samples: [Sample], levelChanges: [ConstrainedRunReport.LevelChange], limitBytes: UInt64) -> Int {
        let smallest = smallestFall(limitBytes: limitBytes)
        var falls = 0
        var next = 0  // the first level change after the current sample
        var level = "normal"
        for (earlier, later) in zip(samples, samples.dropFirst()) {
            while next < levelChanges.count, levelChanges[next].seconds <= earlier.seconds {
                level = levelChanges[next].level
                next += 1
            }
            var pressed = level != "normal"
            var index = next
            while !pressed, index < levelChanges.count, levelChanges[index].seconds <= later.seconds {
                pressed = levelChanges[index].level != "normal"
                index += 1
            }
            if pressed, earlier.floorBytes >= later.floorBytes + smallest { falls += 1 }
        }
        return falls
    }

    /// The lowest point of each whole window after the first (a last window cut short by the
    /// end of the soak is left out: its few samples would make a trough of their own).
    static func troughs(of points: [Point], window: Double, span: Double) -> [Point] {
        var lowest: [Int: Point] = [:]
        let whole = Int((span + 1e-9) / window)
        for point in points {
            let index = Int(point.seconds / window)
            guard index >= 1, index < whole else { continue }
            if let current = lowest[index], current.bytes <= point.bytes { continue }
            lowest[index] = point
        }
        return lowest.keys.sorted().compactMap { lowest[$0] }
    }

    /// Sen's slope: the median of the slopes between every two points, in bytes a second.
    static func senSlope(_ points: [Point]) -> Double {
        var slopes: [Double] = []
        for i in points.indices {
            for j in points.indices where j > i && points[j].seconds > points[i].seconds {
                slopes.append((Double(points[j].bytes) - Double(points[i].bytes)) / (points[j].seconds - points[i].seconds))
            }
        }
        guard !slopes.isEmpty else { return 0 }
        slopes.sort()
        let middle = slopes.count / 2
        return slopes.count % 2 == 1 ? slopes[middle] : (slopes[middle - 1] + slopes[middle]) / 2
    }

    /// The Mann–Kendall test's one-sided confidence that the points rise: 1 − p, with S's
    /// variance `n(n−1)(2n+5)/18` less the ties' part and a continuity correction.
    static func risingConfidence(_ points: [Point]) -> Double {
        let n = points.count
        guard n >= 3 else { return 0 }
        var s = 0
        for i in 0..<n {
            for j in (i + 1)..<n {
                s += points[j].bytes > points[i].bytes ? 1 : points[j].bytes < points[i].bytes ? -1 : 0
            }
        }
        var ties: [UInt64: Int] = [:]
        for point in points { ties[point.bytes, default: 0] += 1 }
        let tiePart = ties.values.filter { $0 > 1 }.reduce(0.0) { sum, t in sum + Double(t * (t - 1) * (2 * t + 5)) }
        let variance = (Double(n * (n - 1) * (2 * n + 5)) - tiePart) / 18
        guard variance > 0, s > 0 else { return 0 }
        let z = (Double(s) - 1) / variance.squareRoot()
        return 1 - 0.5 * erfc(z / 2.0.squareRoot())
    }

    static func lastQuarterMedian(_ points: [Point]) -> UInt64? {
        guard !points.isEmpty else { return nil }
        let quarter = points.suffix(max(1, points.count / 4)).map(\.bytes).sorted()
        return quarter[quarter.count / 2]
    }
}

func mebibytes(_ bytes: Double) -> String { String(format: "%.1f MiB", bytes / 1_048_576) }

func percent(_ fraction: Double) -> String {
    fraction >= 0.999 ? "> 99.9 %" : String(format: "%.1f %%", fraction * 100)
}

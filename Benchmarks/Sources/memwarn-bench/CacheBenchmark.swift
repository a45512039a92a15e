import Foundation
import Memwarn
import MemwarnTestKit
import Synchronization

/// Set and get throughput of `DiscardableCache` beside Foundation's `NSCache` and a plain
/// `[Int: Value]` behind a `Mutex`, in the same process, on the same keys, costs and values.
///
/// For each size N: N inserts with `setObject(_:forKey:cost:)` (no limits) into a new, empty
/// container, then N gets of existing keys in a shuffled order. `NSCache`'s set is O(n) on Linux
/// (it keeps its entries in a list sorted by cost), so it runs at the reference size and at a
/// larger size only when the reference run, scaled quadratically, projects under ``nsCacheBound``.
struct CacheBenchmark {
    /// `NSCache`'s reference size: always measured, and the base of the projections.
    static let referenceSize = 20_000
    /// The longest projected `NSCache` run the benchmark starts, in seconds.
    static let nsCacheBound = 60.0
    /// Runs of `DiscardableCache` and the locked dictionary at a size (the median is reported):
    /// at least 5, and as many as make 2,000,000 operations of each, up to 51 — a run at 20,000
    /// entries takes a few milliseconds, and the median of 5 of them moved by ±20 % between
    /// invocations on the 2-CPU machine.
    static func runs(at size: Int) -> Int { max(5, min(51, 2_000_000 / max(1, size))) }

    var sizes: [Int]

    /// The values stored: the same instances go into all three containers.
    final class Value: Sendable {
        let id: Int
        let cost: Int
        init(id: Int, cost: Int) {
            self.id = id
            self.cost = cost
        }
    }

    static func cost(_ index: Int) -> Int { 1 + (index &* 7919) % 4096 }

    enum Container: String, CaseIterable {
        case discardableCache = "DiscardableCache"
        case lockedDictionary = "locked Dictionary"
        case nsCache = "NSCache"
    }

    /// One fill and read-back.
    struct Run {
        var setNanoseconds: UInt64
        var getNanoseconds: UInt64
        var totalNanoseconds: UInt64 { setNanoseconds + getNanoseconds }
    }

    struct Measurement {
        var container: Container
        var size: Int
        /// Every run, in order; the figures are the median run's (by total time).
        var runs: [Run]
        var median: Run {
            let sorted = runs.sorted { $0.totalNanoseconds < $1.totalNanoseconds }
            return sorted[(sorted.count - 1) / 2]
        }
        var nanosecondsPerSet: Double { Double(median.setNanoseconds) / Double(size) }
        var nanosecondsPerGet: Double { Double(median.getNanoseconds) / Double(size) }
        var totalSeconds: Double { Double(median.totalNanoseconds) / 1_000_000_000 }
    }

    struct Skip {
        var size: Int
        var projectedSeconds: Double
    }

    struct Result {
        var sizes: [Int]
        var measurements: [Measurement]
        var nsCacheSkipped: [Skip]
    }

    /// The keys, costs, values and shuffled get order for one size.
    struct Workload {
        var size: Int
        var costs: [Int]
        var values: [Value]
        var numbers: [NSNumber]
        var order: [Int]

        init(size: Int) {
            self.size = size
            costs = (0..<size).map(CacheBenchmark.cost)
            values = (0..<size).map { Value(id: $0, cost: CacheBenchmark.cost($0)) }
            numbers = (0..<size).map { NSNumber(value: $0) }
            var generator = SeededGenerator(seed: UInt64(size))
            order = Array(0..<size)
            order.shuffle(using: &generator)
        }

        /// The sum of the ids of all values: what the gets must add up to.
        var expectedChecksum: Int { size * (size - 1) / 2 }
    }

    func run(progress: (String) -> Void) throws -> Result {
        var sizes = Array(Set(sizes + [Self.referenceSize])).sorted()
        sizes.removeAll { $0 <= 0 }
        var measurements: [Measurement] = []
        var skipped: [Skip] = []
        var referenceSeconds: Double?
        for size in sizes {
            let workload = Workload(size: size)
            var discardable: [Run] = []
            var dictionary: [Run] = []
            progress("\(size) entries: DiscardableCache and locked Dictionary, \(Self.runs(at: size)) runs each")
            // Interleaved, so that drift in the machine's speed affects both alike.
            for _ in 0..<Self.runs(at: size) {
                discardable.append(try Self.measureDiscardableCache(workload))
                dictionary.append(try Self.measureLockedDictionary(workload))
            }
            measurements.append(Measurement(container: .discardableCache, size: size, runs: discardable))
            measurements.append(Measurement(container: .lockedDictionary, size: size, runs: dictionary))

            let ratio = Double(size) / Double(Self.referenceSize)
            let projected = referenceSeconds.map { $0 * ratio * ratio }
            if size <= Self.referenceSize || (projected ?? .infinity) < Self.nsCacheBound {
                progress("\(size) entries: NSCache" + (projected.map { " (projected \(fixed($0, 1)) s)" } ?? ""))
                let measurement = Measurement(container: .nsCache, size: size, runs: [try Self.measureNSCache(workload)])
                if size == Self.referenceSize { referenceSeconds = measurement.totalSeconds }
                measurements.append(measurement)
            } else {
                skipped.append(Skip(size: size, projectedSeconds: projected ?? .infinity))
            }
        }
        return Result(sizes: sizes, measurements: measurements, nsCacheSkipped: skipped)
    }

    // MARK: The three containers (each in its own function, with its concrete type)

    private static func measureDiscardableCache(_ workload: Workload) throws -> Run {
        let cache = DiscardableCache<Int, Value>(coordinator: nil)
        let costs = workload.costs, values = workload.values, order = workload.order
        let start = ChildProcess.monotonicNanoseconds()
        for index in 0..<workload.size {
            cache.setObject(values[index], forKey: index, cost: costs[index])
        }
        let filled = ChildProcess.monotonicNanoseconds()
        var checksum = 0
        for key in order {
            if let value = cache.object(forKey: key) { checksum &+= value.id }
        }
        let end = ChildProcess.monotonicNanoseconds()
        try check(checksum, workload, .discardableCache)
        guard cache.totalCost == costs.reduce(0, +) else { throw BenchmarkError("DiscardableCache holds the wrong total cost") }
        return Run(setNanoseconds: filled - start, getNanoseconds: end - filled)
    }

    private static func measureLockedDictionary(_ workload: Workload) throws -> Run {
        let dictionary = Mutex<[Int: Value]>([:])
        let values = workload.values, order = workload.order
        let start = ChildProcess.monotonicNanoseconds()
        for index in 0..<workload.size {
            let value = values[index]
            dictionary.withLock { $0[index] = value }
        }
        let filled = ChildProcess.monotonicNanoseconds()
        var checksum = 0
        for key in order {
            if let value = dictionary.withLock({ $0[key] }) { checksum &+= value.id }
        }
        let end = ChildProcess.monotonicNanoseconds()
        try check(checksum, workload, .lockedDictionary)
        return Run(setNanoseconds: filled - start, getNanoseconds: end - filled)
    }

    private static func measureNSCache(_ workload: Workload) throws -> Run {
        let cache = NSCache<NSNumber, Value>()
        let costs = workload.costs, values = workload.values, numbers = workload.numbers, order = workload.order
        let start = ChildProcess.monotonicNanoseconds()
        for index in 0..<workload.size {
            cache.setObject(values[index], forKey: numbers[index], cost: costs[index])
        }
        let filled = ChildProcess.monotonicNanoseconds()
        var checksum = 0
        for key in order {
            if let value = cache.object(forKey: numbers[key]) { checksum &+= value.id }
        }
        let end = ChildProcess.monotonicNanoseconds()
        try check(checksum, workload, .nsCache)
        return Run(setNanoseconds: filled - start, getNanoseconds: end - filled)
    }

    /// Every get must have found its value (and using the values keeps the gets from being optimized away).
    private static func check(_ checksum: Int, _ workload: Workload, _ container: Container) throws {
        guard checksum == workload.expectedChecksum else {
            throw BenchmarkError("\(container.rawValue) at \(workload.size) entries: gets returned the wrong values (checksum \(checksum), expected \(workload.expectedChecksum))")
        }
    }
}


extension CacheBenchmark.Result {
    func measurement(_ container: CacheBenchmark.Container, _ size: Int) -> CacheBenchmark.Measurement? {
        measurements.first { $0.container == container && $0.size == size }
    }

    /// A ratio of two figures, or `nil` when either is missing.
    struct Ratio {
        var name: String
        var goal: String
        var set: Double?
        var get: Double?
        var total: Double?
        /// Whether the goal is met (`nil` when it has no threshold, or a figure is missing).
        var met: Bool?
    }

    private func ratio(_ name: String, goal: String, _ numerator: CacheBenchmark.Measurement?, _ denominator: CacheBenchmark.Measurement?,
                       perOperation: Bool = false, met: ((Double) -> Bool)? = nil) -> Ratio {
        guard let numerator, let denominator else { return Ratio(name: name, goal: goal) }
        let set = numerator.nanosecondsPerSet / denominator.nanosecondsPerSet
        let get = numerator.nanosecondsPerGet / denominator.nanosecondsPerGet
        let total = perOperation
            ? (numerator.totalSeconds / Double(numerator.size)) / (denominator.totalSeconds / Double(denominator.size))
            : numerator.totalSeconds / denominator.totalSeconds
        return Ratio(name: name, goal: goal, set: set, get: get, total: total, met: met.map { $0(total) })
    }

    var ratios: [Ratio] {
        let reference = CacheBenchmark.referenceSize
        let largest = sizes.last ?? reference
        var ratios = sizes.map { size in
            ratio("DiscardableCache / locked Dictionary @\(size)", goal: "<= 1.4x",
                  measurement(.discardableCache, size), measurement(.lockedDictionary, size), met: { $0 <= 1.4 })
        }
        ratios.append(ratio("NSCache / DiscardableCache @\(reference)", goal: ">= 300x",
                            measurement(.nsCache, reference), measurement(.discardableCache, reference), met: { $0 >= 300 }))
        if largest != reference {
            ratios.append(ratio("DiscardableCache per op @\(largest) / @\(reference)", goal: "flat (~1x)",
                                measurement(.discardableCache, largest), measurement(.discardableCache, reference), perOperation: true))
            ratios.append(ratio("  locked Dictionary per op @\(largest) / @\(reference) (reference)", goal: "",
                                measurement(.lockedDictionary, largest), measurement(.lockedDictionary, reference), perOperation: true))
        }
        return ratios
    }

    var report: String {
        var rows = [["entries", "container", "ns/set", "ns/get", "total s", "runs"]]
        for size in sizes {
            for container in CacheBenchmark.Container.allCases {
                if let measurement = measurement(container, size) {
                    rows.append([String(size), container.rawValue, fixed(measurement.nanosecondsPerSet, 1), fixed(measurement.nanosecondsPerGet, 1),
                                 fixed(measurement.totalSeconds, 4), String(measurement.runs.count)])
                } else if let skip = nsCacheSkipped.first(where: { $0.size == size }), container == .nsCache {
                    rows.append([String(size), container.rawValue, "skipped (projected \(fixed(skip.projectedSeconds, 0)) s > \(fixed(CacheBenchmark.nsCacheBound, 0)) s bound)", "", "", ""])
                }
            }
        }
        func x(_ value: Double?) -> String { value.map { fixed($0, $0 >= 100 ? 0 : 2) + "x" } ?? "n/a" }
        var ratioRows = [["ratio", "set", "get", "total", "goal", "met"]]
        for ratio in ratios {
            ratioRows.append([ratio.name, x(ratio.set), x(ratio.get), x(ratio.total), ratio.goal,
                              ratio.met.map { $0 ? "yes" : "no" } ?? (ratio.goal.isEmpty ? "" : "-")])
        }
        return """
        cache: N sets with setObject(_:forKey:cost:) into an empty container (no limits; cost = 1 + (i * 7919) % 4096),
        then N gets of existing keys in a shuffled order; value: a final class instance (the same ones in all three);
        DiscardableCache (coordinator: nil) and the Mutex-locked [Int: Value]: median of 5 to 51 runs (2,000,000 operations' worth), interleaved;
        NSCache<NSNumber, Value> (keys made beforehand): one run, at \(CacheBenchmark.referenceSize) and where its quadratic projection is under \(fixed(CacheBenchmark.nsCacheBound, 0)) s

        \(table(rows))

        \(table(ratioRows))
        (per-op ratios compare ns per operation; the others compare total time at one size)
        """
    }

    var json: JSON {
        let null = JSON.double(.nan, digits: 0)  // a non-finite double prints as null
        func number(_ value: Double?, _ digits: Int) -> JSON { value.map { .double($0, digits: digits) } ?? null }
        let results: [JSON] = measurements.map { measurement in
            .object([
                ("container", .string(measurement.container.rawValue)),
                ("entries", .number(measurement.size)),
                ("set_ns_per_op", .double(measurement.nanosecondsPerSet, digits: 2)),
                ("get_ns_per_op", .double(measurement.nanosecondsPerGet, digits: 2)),
                ("total_seconds", .double(measurement.totalSeconds, digits: 6)),
                ("runs_total_seconds", .array(measurement.runs.map { .double(Double($0.totalNanoseconds) / 1_000_000_000, digits: 6) })),
            ])
        }
        let skips: [JSON] = nsCacheSkipped.map { skip in
            .object([
                ("container", .string(CacheBenchmark.Container.nsCache.rawValue)),
                ("entries", .number(skip.size)),
                ("skipped", .bool(true)),
                ("projected_seconds", .double(skip.projectedSeconds, digits: 1)),
                ("bound_seconds", .double(CacheBenchmark.nsCacheBound, digits: 0)),
            ])
        }
        let ratioObjects: [JSON] = ratios.map { ratio in
            .object([
                ("ratio", .string(String(ratio.name.trimmingPrefix(while: { $0 == " " })))),
                ("set", number(ratio.set, 3)),
                ("get", number(ratio.get, 3)),
                ("total", number(ratio.total, 3)),
                ("goal", .string(ratio.goal)),
                ("met", ratio.met.map { .bool($0) } ?? null),
            ])
        }
        return .object([
            ("benchmark", .string("cache")),
            ("sizes", .array(sizes.map { .number($0) })),
            ("cost", .string("1 + (i * 7919) % 4096")),
            ("value", .string("final class (the same instances in all three)")),
            ("runs_per_size", .array(sizes.map { .number(CacheBenchmark.runs(at: $0)) })),
            ("nscache_reference_entries", .number(CacheBenchmark.referenceSize)),
            ("nscache_bound_seconds", .double(CacheBenchmark.nsCacheBound, digits: 0)),
            ("results", .array(results + skips)),
            ("ratios", .array(ratioObjects)),
        ])
    }
}

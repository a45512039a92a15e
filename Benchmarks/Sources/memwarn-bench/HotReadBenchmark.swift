import Dispatch
import Memwarn
import MemwarnTestKit
import Synchronization

/// Reads of a few hot keys from one thread and from two threads at once, in `DiscardableCache`
/// beside the `Mutex`-locked dictionary: total reads per second. A hit in `DiscardableCache`
/// takes its lock shared (it only counts the read), so two readers should get more done
/// together than one; the locked dictionary serializes every read.
///
/// Two kinds of value: `Int`, where a read writes nothing shared but what the container itself
/// writes (the goal is judged here), and a class instance, where every read of any Swift
/// container also retains and releases the value: two threads reading the same objects write
/// the same reference counts, and the lines holding them move between the cores on each read
/// (measured on the 2-CPU machine: from 1.6x down to 0.5x, by where the threads ran).
struct HotReadBenchmark {
    /// The hot keys, all present.
    static let keys = 1_024
    /// Reads each thread makes in one run.
    static let readsPerThread = 4_000_000
    /// Runs per container, value kind and thread count (the median is reported).
    static let runs = 5
    static let threadCounts = [1, 2]

    typealias Value = CacheBenchmark.Value

    enum ValueKind: String, CaseIterable {
        case integer = "Int"
        case object = "class"
    }

    /// A locked dictionary, as a class so both threads share it.
    final class LockedDictionary<Stored: Sendable>: Sendable {
        let storage = Mutex<[Int: Stored]>([:])
    }

    struct Measurement {
        var container: CacheBenchmark.Container
        var valueKind: ValueKind
        var threads: Int
        /// Every run's wall-clock time, in nanoseconds; the figures are the median's.
        var runs: [UInt64]
        var medianNanoseconds: UInt64 { UInt64(LatencySummary(runs.map(Int64.init)).percentile(50)) }
        var readsPerSecond: Double {
            Double(threads * HotReadBenchmark.readsPerThread) / (Double(medianNanoseconds) / 1_000_000_000)
        }
    }

    struct Result {
        var measurements: [Measurement]
    }

    func run(progress: (String) -> Void) throws -> Result {
        let objects = (0..<Self.keys).map { Value(id: $0, cost: CacheBenchmark.cost($0)) }
        let integerCache = DiscardableCache<Int, Int>(coordinator: nil)
        let objectCache = DiscardableCache<Int, Value>(coordinator: nil)
        let integerDictionary = LockedDictionary<Int>()
        let objectDictionary = LockedDictionary<Value>()
        for (key, object) in objects.enumerated() {
            integerCache.setObject(key, forKey: key, cost: object.cost)
            objectCache.setObject(object, forKey: key, cost: object.cost)
            integerDictionary.storage.withLock { $0[key] = key }
            objectDictionary.storage.withLock { $0[key] = object }
        }
        var measurements: [Measurement] = []
        for valueKind in ValueKind.allCases {
            for threads in Self.threadCounts {
                progress("hot reads: \(Self.keys) keys, \(valueKind.rawValue) values, \(threads) thread(s), \(Self.runs) runs each")
                var cacheRuns: [UInt64] = [], dictionaryRuns: [UInt64] = []
                for _ in 0..<Self.runs {  // interleaved, as in the cache benchmark
                    switch valueKind {
                    case .integer:
                        cacheRuns.append(try Self.measure(threads: threads, container: .discardableCache) { key in
                            integerCache.object(forKey: key) ?? -1
                        })
                        dictionaryRuns.append(try Self.measure(threads: threads, container: .lockedDictionary) { key in
                            integerDictionary.storage.withLock { $0[key] } ?? -1
                        })
                    case .object:
                        cacheRuns.append(try Self.measure(threads: threads, container: .discardableCache) { key in
                            objectCache.object(forKey: key)?.id ?? -1
                        })
                        dictionaryRuns.append(try Self.measure(threads: threads, container: .lockedDictionary) { key in
                            objectDictionary.storage.withLock { $0[key] }?.id ?? -1
                        })
                    }
                }
                measurements.append(Measurement(container: .discardableCache, valueKind: valueKind, threads: threads, runs: cacheRuns))
                measurements.append(Measurement(container: .lockedDictionary, valueKind: valueKind, threads: threads, runs: dictionaryRuns))
            }
        }
        return Result(measurements: measurements)
    }

    /// Runs `read` on `threads` threads at once, each `readsPerThread` reads of the hot keys in
    /// its own order; returns the wall-clock time and checks that every read found its value.
    private static func measure(threads: Int, container: CacheBenchmark.Container, read: @Sendable (Int) -> Int) throws -> UInt64 {
        let misses = Atomic<Int>(0)
        let start = ChildProcess.monotonicNanoseconds()
        DispatchQueue.concurrentPerform(iterations: threads) { thread in
            // Each thread its own pseudo-random order: threads walking one stride in step can
            // lock into reading neighbouring objects at once, whose reference counts then share
            // a cache line (measured: one run in three at half the throughput).
            var random = SeededGenerator(seed: UInt64(thread + 1))
            var missed = 0
            for _ in 0..<readsPerThread {
                let key = Int(truncatingIfNeeded: random.next()) & (keys - 1)
                if read(key) != key { missed += 1 }
            }
            misses.add(missed, ordering: .relaxed)
        }
        let elapsed = ChildProcess.monotonicNanoseconds() - start
        guard misses.load(ordering: .relaxed) == 0 else {
            throw BenchmarkError("\(container.rawValue): \(misses.load(ordering: .relaxed)) hot reads missed")
        }
        return elapsed
    }
}

extension HotReadBenchmark.Result {
    func measurement(_ container: CacheBenchmark.Container, _ valueKind: HotReadBenchmark.ValueKind, threads: Int) -> HotReadBenchmark.Measurement? {
        measurements.first { $0.container == container && $0.valueKind == valueKind && $0.threads == threads }
    }

    /// Two threads' total reads per second over one thread's.
    func scaling(_ container: CacheBenchmark.Container, _ valueKind: HotReadBenchmark.ValueKind) -> Double? {
        guard let one = measurement(container, valueKind, threads: 1), let two = measurement(container, valueKind, threads: 2) else { return nil }
        return two.readsPerSecond / one.readsPerSecond
    }

    static let containers = [CacheBenchmark.Container.discardableCache, .lockedDictionary]

    var report: String {
        var rows = [["container", "values", "threads", "M reads/s (total)", "ms (median)"]]
        for measurement in measurements {
            rows.append([measurement.container.rawValue, measurement.valueKind.rawValue, String(measurement.threads),
                         fixed(measurement.readsPerSecond / 1_000_000, 1), fixed(Double(measurement.medianNanoseconds) / 1_000_000, 1)])
        }
        var ratioRows = [["2 threads / 1 thread (total reads/s)", "values", "ratio", "goal", "met"]]
        for valueKind in HotReadBenchmark.ValueKind.allCases {
            for container in Self.containers {
                let value = scaling(container, valueKind)
                let judged = container == .discardableCache && valueKind == .integer
                ratioRows.append([container.rawValue, valueKind.rawValue, value.map { fixed($0, 2) + "x" } ?? "n/a", judged ? "> 1x" : "",
                                  judged ? (value.map { $0 > 1 ? "yes" : "no" } ?? "-") : ""])
            }
        }
        return """
        hot reads: \(HotReadBenchmark.keys) keys, all present; each thread reads \(HotReadBenchmark.readsPerThread) times, keys in its own pseudo-random order;
        1 thread, then 2 threads at once (DispatchQueue.concurrentPerform); median wall-clock time of \(HotReadBenchmark.runs) runs, interleaved;
        Int values, then class values (every read retains the object: two threads write the same reference counts)

        \(table(rows))

        \(table(ratioRows))
        """
    }

    var json: JSON {
        let null = JSON.double(.nan, digits: 0)
        return .object([
            ("keys", .number(HotReadBenchmark.keys)),
            ("reads_per_thread", .number(HotReadBenchmark.readsPerThread)),
            ("runs", .number(HotReadBenchmark.runs)),
            ("results", .array(measurements.map { measurement in
                .object([
                    ("container", .string(measurement.container.rawValue)),
                    ("values", .string(measurement.valueKind.rawValue)),
                    ("threads", .number(measurement.threads)),
                    ("reads_per_second", .double(measurement.readsPerSecond, digits: 0)),
                    ("median_seconds", .double(Double(measurement.medianNanoseconds) / 1_000_000_000, digits: 6)),
                ])
            })),
            ("two_threads_over_one", .array(HotReadBenchmark.ValueKind.allCases.flatMap { valueKind in
                Self.containers.map { container in
                    .object([("container", .string(container.rawValue)), ("values", .string(valueKind.rawValue)),
                             ("ratio", scaling(container, valueKind).map { .double($0, digits: 3) } ?? null)])
                }
            })),
            ("goal", .string("DiscardableCache with Int values: 2 threads > 1 thread")),
        ])
    }
}

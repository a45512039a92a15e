import MemwarnTestKit
import Memwarn
#if canImport(Glibc)
import Glibc
#endif

/// What the benchmark's caches hold: plain Swift arrays on malloc's heap, or ``PurgeableData``
/// in memwarn's purgeable arena (created, then its first access ended, as Apple documents).
enum ReleasedValues: String, CaseIterable {
    case arrays = "[UInt8]"
    case purgeable = "PurgeableData"
}

/// How long a ``ReleaseCoordinator`` takes to give back 1 GiB held by ten `DiscardableCache`s,
/// all of it and half of it, with and without the trim step (`malloc_trim(0)` and the
/// purgeable arena's free pages), and what the process's resident set does; for each kind of
/// value in `values`.
struct ReleaseBenchmark {
    static let consumerCount = 10
    static let entriesPerConsumer = 100_000
    static let totalBytes = 1 << 30
    static let partialBytes = 512 << 20
    static let goalMilliseconds = 100.0
    /// Measurements of each kind (the median, by release time, is reported).
    static let runs = 5

    var values: [ReleasedValues] = ReleasedValues.allCases

    /// Entry sizes: varied (`50 + (i * 7919) % 2047`), then evened out so they add up to exactly ``totalBytes``.
    static func entrySizes() -> [Int] {
        let count = consumerCount * entriesPerConsumer
        var sizes = (0..<count).map { 50 + ($0 &* 7919) % 2047 }
        let delta = totalBytes - sizes.reduce(0, +)
        let each = delta / count, extra = delta % count
        for index in sizes.indices { sizes[index] += each + (index < abs(extra) ? extra.signum() : 0) }
        return sizes
    }

    struct Scenario {
        var values: ReleasedValues
        var name: String
        var targetBytes: Int
        var trimsHeap: Bool
        var fillNanoseconds: UInt64
        var heldBytes: Int
        var releaseNanoseconds: UInt64
        var report: ReleaseReport
        var rssBefore: Int
        var rssAfter: Int
        /// Of `rssBefore`, the bytes on transparent huge pages (`AnonHugePages`).
        var hugePagesBefore: Int
        /// The trim step (`malloc_trim(0)`, then the purgeable arena's free pages), done by
        /// the benchmark after a release that did not trim.
        var trimNanoseconds: UInt64?
        var rssAfterTrim: Int?
        /// Every run's release time and trim time, in order (set on the median run).
        var runsReleaseNanoseconds: [UInt64] = []
        var runsTrimNanoseconds: [UInt64] = []
    }

    /// One cache asked directly for half its bytes: a partial release (in the cache's release order) on its own.
    struct HeapPath {
        var values: ReleasedValues
        var entriesBefore: Int
        var entriesAfter: Int
        var bytesBefore: Int
        var targetBytes: Int
        var freedBytes: Int
        var nanoseconds: UInt64
        var runsNanoseconds: [UInt64] = []
    }

    struct Result {
        /// How the glibc heap is set up in this process (`GLIBC_TUNABLES`, or the default).
        var heap: String
        var sizes: (min: Int, max: Int, mean: Double)
        var scenarios: [Scenario]
        var heapPaths: [HeapPath]
    }

    func run(progress: (String) -> Void) throws -> Result {
        let sizes = Self.entrySizes()
        let kinds = values.flatMap { values in
            [(values, "everything", Int.max, true), (values, "everything", Int.max, false),
             (values, "512 MiB", Self.partialBytes, true), (values, "512 MiB", Self.partialBytes, false)]
        }
        var runs = Array(repeating: [Scenario](), count: kinds.count)
        var heapPaths = Array(repeating: [HeapPath](), count: values.count)
        // Interleaved, so that drift in the machine's speed affects every kind alike.
        for run in 1...Self.runs {
            for (kind, (values, name, target, trimsHeap)) in kinds.enumerated() {
                progress("run \(run)/\(Self.runs): \(values.rawValue), \(name), trimsHeap \(trimsHeap)")
                runs[kind].append(try Self.measure(values, name: name, target: target, trimsHeap: trimsHeap, sizes: sizes))
                ReleaseCoordinator.returnFreedMemory()  // every measurement starts with the heap given back
            }
            for (index, values) in values.enumerated() {
                progress("run \(run)/\(Self.runs): \(values.rawValue), part of one cache")
                heapPaths[index].append(Self.measureHeapPath(values, sizes: sizes))
                ReleaseCoordinator.returnFreedMemory()
            }
        }
        let scenarios = runs.map { runs in
            var median = runs.sorted { $0.releaseNanoseconds < $1.releaseNanoseconds }[(runs.count - 1) / 2]
            median.runsReleaseNanoseconds = runs.map(\.releaseNanoseconds)
            median.runsTrimNanoseconds = runs.compactMap(\.trimNanoseconds)
            return median
        }
        let medianHeapPaths = heapPaths.map { runs in
            var median = runs.sorted { $0.nanoseconds < $1.nanoseconds }[(runs.count - 1) / 2]
            median.runsNanoseconds = runs.map(\.nanoseconds)
            return median
        }
        let mean = Double(sizes.reduce(0, +)) / Double(sizes.count)
        return Result(heap: Self.heapDescription, sizes: (sizes.min() ?? 0, sizes.max() ?? 0, mean), scenarios: scenarios,
                      heapPaths: medianHeapPaths)
    }

    private static func fill<Value>(_ cache: DiscardableCache<Int, Value>, consumer: Int, sizes: [Int], make: (_ key: Int, _ size: Int) -> Value) {
        let first = consumer * entriesPerConsumer
        for key in 0..<entriesPerConsumer {
            let size = sizes[first + key]
            cache.setObject(make(key, size), forKey: key, cost: size)
        }
    }

    private static func makeArray(key: Int, size: Int) -> [UInt8] {
        [UInt8](repeating: UInt8(truncatingIfNeeded: key), count: size)
    }

    private static func makePurgeable(key: Int, size: Int) -> PurgeableData {
        let data = PurgeableData(repeating: UInt8(truncatingIfNeeded: key), count: size)
        data.endContentAccess()  // created in use; cached and idle from here
        return data
    }

    private static func measure(_ values: ReleasedValues, name: String, target: Int, trimsHeap: Bool, sizes: [Int]) throws -> Scenario {
        switch values {
        case .arrays: try measure(values, name: name, target: target, trimsHeap: trimsHeap, sizes: sizes, make: makeArray)
        case .purgeable: try measure(values, name: name, target: target, trimsHeap: trimsHeap, sizes: sizes, make: makePurgeable)
        }
    }

    private static func measure<Value>(_ values: ReleasedValues, name: String, target: Int, trimsHeap: Bool, sizes: [Int],
                                       make: (Int, Int) -> Value) throws -> Scenario {
        let coordinator = ReleaseCoordinator(trimsHeap: trimsHeap)
        let filling = ChildProcess.monotonicNanoseconds()
        let caches = (0..<consumerCount).map { consumer in
            let cache = DiscardableCache<Int, Value>(coordinator: coordinator)
            cache.name = "cache-\(consumer)"
            fill(cache, consumer: consumer, sizes: sizes, make: make)
            return cache
        }
        let fillNanoseconds = ChildProcess.monotonicNanoseconds() - filling
        let held = caches.reduce(0) { $0 + $1.totalCost }
        guard held == totalBytes else { throw BenchmarkError("the caches hold \(held) bytes, not \(totalBytes)") }

        let rssBefore = residentBytes()
        let hugePagesBefore = anonymousHugePageBytes()
        let start = ChildProcess.monotonicNanoseconds()
        let report = coordinator.release(level: .critical, targetBytes: target)
        let releaseNanoseconds = ChildProcess.monotonicNanoseconds() - start
        let rssAfter = residentBytes()

        var trimNanoseconds: UInt64?
        var rssAfterTrim: Int?
        if !trimsHeap {
            let trimStart = ChildProcess.monotonicNanoseconds()
            ReleaseCoordinator.returnFreedMemory()
            trimNanoseconds = ChildProcess.monotonicNanoseconds() - trimStart
            rssAfterTrim = residentBytes()
        }
        withExtendedLifetime(caches) {}  // the coordinator holds them weakly
        return Scenario(values: values, name: name, targetBytes: target, trimsHeap: trimsHeap, fillNanoseconds: fillNanoseconds, heldBytes: held,
                        releaseNanoseconds: releaseNanoseconds, report: report, rssBefore: rssBefore, rssAfter: rssAfter, hugePagesBefore: hugePagesBefore,
                        trimNanoseconds: trimNanoseconds, rssAfterTrim: rssAfterTrim)
    }

    private static func measureHeapPath(_ values: ReleasedValues, sizes: [Int]) -> HeapPath {
        switch values {
        case .arrays: measureHeapPath(values, sizes: sizes, make: makeArray)
        case .purgeable: measureHeapPath(values, sizes: sizes, make: makePurgeable)
        }
    }

    private static func measureHeapPath<Value>(_ values: ReleasedValues, sizes: [Int], make: (Int, Int) -> Value) -> HeapPath {
        let cache = DiscardableCache<Int, Value>(coordinator: nil)
        fill(cache, consumer: 0, sizes: sizes, make: make)
        let entriesBefore = cache.count, bytesBefore = cache.totalCost
        let target = bytesBefore / 2
        let start = ChildProcess.monotonicNanoseconds()
        let freed = cache.release(ReleaseRequest(level: .critical, tier: .caches, targetBytes: target))
        let nanoseconds = ChildProcess.monotonicNanoseconds() - start
        return HeapPath(values: values, entriesBefore: entriesBefore, entriesAfter: cache.count, bytesBefore: bytesBefore, targetBytes: target,
                        freedBytes: freed, nanoseconds: nanoseconds)
    }
}

extension ReleaseBenchmark {
    /// This process's heap set-up: its `GLIBC_TUNABLES`, or glibc's default (4 KiB pages).
    static var heapDescription: String {
        guard let tunables = getenv("GLIBC_TUNABLES").map({ String(cString: $0) }), !tunables.isEmpty else {
            return "glibc default (4 KiB pages)"
        }
        return "GLIBC_TUNABLES=\(tunables)"
    }
}

/// glibc's `malloc_trim`, looked up at run time (Swift's Glibc module does not export it).
func mallocTrim() -> (@convention(c) (UInt) -> Int32)? {
    guard let symbol = dlsym(nil, "malloc_trim") else { return nil }
    return unsafeBitCast(symbol, to: (@convention(c) (UInt) -> Int32).self)
}

/// This process's resident set (`VmRSS` of `/proc/self/status`) in bytes, or 0 when unreadable.
func residentBytes() -> Int { procBytes("/proc/self/status", key: "VmRSS") }

/// A `Key:   N kB` line of a `/proc` file, in bytes, or 0 when unreadable.
func procBytes(_ file: String, key: String) -> Int {
    guard let text = readSmallFile(file),
          let line = text.split(separator: "\n").first(where: { $0.hasPrefix(key + ":") }),
          let kilobytes = line.dropFirst(key.count + 1).split(whereSeparator: \.isWhitespace).first.flatMap({ Int($0) }) else { return 0 }
    return kilobytes * 1024
}

extension ReleaseBenchmark.Result {
    private func mib(_ bytes: Int) -> String { fixed(Double(bytes) / 1_048_576, 1) }
    private func ms(_ nanoseconds: UInt64) -> Double { Double(nanoseconds) / 1_000_000 }
    private func ms(_ duration: Duration) -> Double {
        let (seconds, attoseconds) = duration.components
        return Double(seconds) * 1_000 + Double(attoseconds) / 1_000_000_000_000_000
    }

    var values: [ReleasedValues] { ReleasedValues.allCases.filter { values in scenarios.contains { $0.values == values } } }

    func scenario(_ name: String, trimsHeap: Bool, values: ReleasedValues) -> ReleaseBenchmark.Scenario? {
        scenarios.first { $0.name == name && $0.trimsHeap == trimsHeap && $0.values == values }
    }

    /// The median full release with the trim step, in ms.
    func fullReleaseMilliseconds(_ values: ReleasedValues) -> Double? {
        scenario("everything", trimsHeap: true, values: values).map { ms($0.releaseNanoseconds) }
    }

    func goalMet(_ values: ReleasedValues) -> Bool? {
        fullReleaseMilliseconds(values).map { $0 < ReleaseBenchmark.goalMilliseconds }
    }

    /// Release time with `trimsHeap` minus release time without, for a scenario.
    func trimShare(_ name: String, values: ReleasedValues) -> Double? {
        guard let with = scenario(name, trimsHeap: true, values: values), let without = scenario(name, trimsHeap: false, values: values) else { return nil }
        return ms(with.releaseNanoseconds) - ms(without.releaseNanoseconds)
    }

    /// A consumer's entry in the caches tier took everything (the fast path) or part (in its release order).
    private func path(_ entry: ReleaseReport.Entry) -> String { entry.bytesAfter == 0 ? "whole" : "part" }

    var report: String {
        var rows = [["values", "release (.critical)", "trimsHeap", "release ms", "runs ms", "freed MiB", "RSS before MiB", "on huge pages MiB", "RSS after MiB", "then trim ms", "RSS after trim MiB"]]
        func runs(_ values: [UInt64]) -> String { values.map { fixed(ms($0), 1) }.joined(separator: " ") }
        for scenario in scenarios {
            rows.append([
                scenario.values.rawValue, scenario.name == "everything" ? "everything (Int.max)" : scenario.name, String(scenario.trimsHeap), fixed(ms(scenario.releaseNanoseconds), 2),
                runs(scenario.runsReleaseNanoseconds), mib(scenario.report.freedBytes), mib(scenario.rssBefore), mib(scenario.hugePagesBefore), mib(scenario.rssAfter),
                scenario.trimNanoseconds.map { fixed(ms($0), 2) } ?? "", scenario.rssAfterTrim.map(mib) ?? "",
            ])
        }
        for heapPath in heapPaths {
            rows.append([heapPath.values.rawValue, "part of one cache (half)", "n/a", fixed(ms(heapPath.nanoseconds), 2), runs(heapPath.runsNanoseconds), mib(heapPath.freedBytes), "", "", "", "", ""])
        }

        var lines: [String] = []
        for values in values {
            if let full = fullReleaseMilliseconds(values) {
                let verdict = full < ReleaseBenchmark.goalMilliseconds ? "met" : "NOT met"
                lines.append("goal, \(values.rawValue): 1 GiB release < \(fixed(ReleaseBenchmark.goalMilliseconds, 0)) ms with trimsHeap: \(verdict) (\(fixed(full, 2)) ms)")
            }
        }
        for values in values {
            for name in ["everything", "512 MiB"] {
                if let share = trimShare(name, values: values), let trims = scenario(name, trimsHeap: false, values: values)?.runsTrimNanoseconds, !trims.isEmpty {
                    lines.append("trim share, \(values.rawValue), \(name): \(fixed(share, 2)) ms (median with − median without); the trim step alone after each no-trim release: \(trims.map { fixed(ms($0), 1) }.joined(separator: ", ")) ms")
                }
            }
            if let partial = scenario("512 MiB", trimsHeap: true, values: values) {
                let asked = partial.report.entries.filter { $0.tier == .caches }
                let whole = asked.filter { path($0) == "whole" }
                let part = asked.filter { path($0) == "part" }
                var line = "\(values.rawValue), 512 MiB, largest first: \(whole.count) caches cleared whole in \(fixed(ms(whole.reduce(Duration.zero) { $0 + $1.duration }), 2)) ms"
                for entry in part {
                    line += "; \(entry.consumer) in part: \(mib(entry.bytesFreed)) of \(mib(entry.bytesBefore)) MiB in \(fixed(ms(entry.duration), 2)) ms"
                }
                lines.append(line)
            }
        }
        for heapPath in heapPaths {
            lines.append("\(heapPath.values.rawValue), part of one cache: \(heapPath.entriesBefore - heapPath.entriesAfter) of \(heapPath.entriesBefore) entries, \(mib(heapPath.freedBytes)) MiB for a target of \(mib(heapPath.targetBytes)) MiB, no trim")
        }
        let fills = scenarios.map { "\($0.values.rawValue) \(fixed(ms($0.fillNanoseconds), 0))" }.joined(separator: ", ")

        return """
        release: \(ReleaseBenchmark.consumerCount) DiscardableCaches on a private ReleaseCoordinator, \(ReleaseBenchmark.consumerCount * ReleaseBenchmark.entriesPerConsumer) entries, heap: \(heap),
        \(ReleaseBenchmark.totalBytes) bytes in all (entry \(sizes.min)–\(sizes.max) B, mean \(fixed(sizes.mean, 1)) B; cost = byte count);
        values: [UInt8] (malloc's heap) or PurgeableData (memwarn's purgeable arena, access ended);
        the trim step: malloc_trim(0), then the arena's free pages (ReleaseCoordinator.returnFreedMemory());
        a fresh fill for every measurement; each row is the median of \(ReleaseBenchmark.runs) runs by release time
        (its RSS, trim and fill figures are that run's; fill ms: \(fills))

        \(table(rows))

        \(lines.joined(separator: "\n"))
        """
    }

    var json: JSON {
        func scenarioJSON(_ scenario: ReleaseBenchmark.Scenario) -> JSON {
            var members: [(String, JSON)] = [
                ("values", .string(scenario.values.rawValue)),
                ("release", .string(scenario.name)),
                ("target_bytes", .number(scenario.targetBytes)),
                ("trims_heap", .bool(scenario.trimsHeap)),
                ("release_ms", .double(ms(scenario.releaseNanoseconds), digits: 3)),
                ("coordinator_report_ms", .double(ms(scenario.report.duration), digits: 3)),
                ("freed_bytes", .number(scenario.report.freedBytes)),
                ("held_bytes", .number(scenario.heldBytes)),
                ("trimmed_heap", .bool(scenario.report.trimmedHeap)),
                ("rss_before_bytes", .number(scenario.rssBefore)),
                ("rss_after_bytes", .number(scenario.rssAfter)),
                ("anon_huge_pages_before_bytes", .number(scenario.hugePagesBefore)),
                ("fill_ms", .double(ms(scenario.fillNanoseconds), digits: 1)),
                ("consumers", .array(scenario.report.entries.map { entry in
                    .object([
                        ("consumer", .string(entry.consumer)),
                        ("tier", .string(entry.tier.name)),
                        ("path", .string(entry.tier == .caches ? path(entry) : "discarded")),
                        ("bytes_before", .number(entry.bytesBefore)),
                        ("bytes_freed", .number(entry.bytesFreed)),
                        ("ms", .double(ms(entry.duration), digits: 3)),
                    ])
                })),
            ]
            members.append(("runs_release_ms", .array(scenario.runsReleaseNanoseconds.map { .double(ms($0), digits: 3) })))
            if let trim = scenario.trimNanoseconds { members.append(("then_trim_ms", .double(ms(trim), digits: 3))) }
            if !scenario.runsTrimNanoseconds.isEmpty {
                members.append(("runs_then_trim_ms", .array(scenario.runsTrimNanoseconds.map { .double(ms($0), digits: 3) })))
            }
            if let rss = scenario.rssAfterTrim { members.append(("rss_after_trim_bytes", .number(rss))) }
            return .object(members)
        }
        let null = JSON.double(.nan, digits: 0)  // a non-finite double prints as null
        return .object([
            ("benchmark", .string("release")),
            ("heap", .string(heap)),
            ("consumers", .number(ReleaseBenchmark.consumerCount)),
            ("entries", .number(ReleaseBenchmark.consumerCount * ReleaseBenchmark.entriesPerConsumer)),
            ("total_bytes", .number(ReleaseBenchmark.totalBytes)),
            ("entry_bytes_min", .number(sizes.min)),
            ("entry_bytes_max", .number(sizes.max)),
            ("entry_bytes_mean", .double(sizes.mean, digits: 2)),
            ("scenarios", .array(scenarios.map(scenarioJSON))),
            ("trim_share_ms", .object(values.flatMap { values in
                [("\(values.rawValue) everything", trimShare("everything", values: values).map { .double($0, digits: 3) } ?? null),
                 ("\(values.rawValue) 512 MiB", trimShare("512 MiB", values: values).map { .double($0, digits: 3) } ?? null)]
            })),
            ("heap_path_alone", .array(heapPaths.map { heapPath in
                .object([
                    ("values", .string(heapPath.values.rawValue)),
                    ("entries_before", .number(heapPath.entriesBefore)),
                    ("entries_after", .number(heapPath.entriesAfter)),
                    ("bytes_before", .number(heapPath.bytesBefore)),
                    ("target_bytes", .number(heapPath.targetBytes)),
                    ("freed_bytes", .number(heapPath.freedBytes)),
                    ("ms", .double(ms(heapPath.nanoseconds), digits: 3)),
                    ("runs_ms", .array(heapPath.runsNanoseconds.map { .double(ms($0), digits: 3) })),
                ])
            })),
            ("runs", .number(ReleaseBenchmark.runs)),
            ("goal_full_release_ms", .double(ReleaseBenchmark.goalMilliseconds, digits: 0)),
            ("goal_met", .object(values.map { values in (values.rawValue, goalMet(values).map { .bool($0) } ?? null) })),
        ])
    }
}

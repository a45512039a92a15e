import Memwarn
#if canImport(Glibc)
import Glibc
#endif

/// How long a ``ReleaseCoordinator`` takes to give back 1 GiB held by ten `DiscardableCache`s,
/// all of it and half of it, with and without `malloc_trim(0)`, and what the process's
/// resident set does.
struct ReleaseBenchmark {
    static let consumerCount = 10
    static let entriesPerConsumer = 100_000
    static let totalBytes = 1 << 30
    static let partialBytes = 512 << 20
    static let goalMilliseconds = 100.0
    /// Measurements of each kind (the median, by release time, is reported).
    static let runs = 3

    typealias Cache = DiscardableCache<Int, [UInt8]>

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
        /// `malloc_trim(0)` called by the benchmark after a release that did not trim.
        var trimNanoseconds: UInt64?
        var rssAfterTrim: Int?
        /// Every run's release time and trim time, in order (set on the median run).
        var runsReleaseNanoseconds: [UInt64] = []
        var runsTrimNanoseconds: [UInt64] = []
    }

    /// One cache asked directly for half its bytes: the heap path (largest first) on its own.
    struct HeapPath {
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
        var heapPath: HeapPath
        var trimAvailable: Bool
    }

    func run(progress: (String) -> Void) throws -> Result {
        let sizes = Self.entrySizes()
        let trim = mallocTrim()
        let kinds = [("everything", Int.max, true), ("everything", Int.max, false),
                     ("512 MiB", Self.partialBytes, true), ("512 MiB", Self.partialBytes, false)]
        var runs = Array(repeating: [Scenario](), count: kinds.count)
        var heapPaths: [HeapPath] = []
        // Interleaved, so that drift in the machine's speed affects every kind alike.
        for run in 1...Self.runs {
            for (kind, (name, target, trimsHeap)) in kinds.enumerated() {
                progress("run \(run)/\(Self.runs): \(name), trimsHeap \(trimsHeap)")
                runs[kind].append(try Self.measure(name: name, target: target, trimsHeap: trimsHeap, sizes: sizes, trim: trim))
                _ = trim?(0)  // every measurement starts with the heap given back
            }
            progress("run \(run)/\(Self.runs): heap path alone")
            heapPaths.append(Self.measureHeapPath(sizes: sizes))
            _ = trim?(0)
        }
        let scenarios = runs.map { runs in
            var median = runs.sorted { $0.releaseNanoseconds < $1.releaseNanoseconds }[(runs.count - 1) / 2]
            median.runsReleaseNanoseconds = runs.map(\.releaseNanoseconds)
            median.runsTrimNanoseconds = runs.compactMap(\.trimNanoseconds)
            return median
        }
        var heapPath = heapPaths.sorted { $0.nanoseconds < $1.nanoseconds }[(heapPaths.count - 1) / 2]
        heapPath.runsNanoseconds = heapPaths.map(\.nanoseconds)
        let mean = Double(sizes.reduce(0, +)) / Double(sizes.count)
        return Result(heap: Self.heapDescription, sizes: (sizes.min() ?? 0, sizes.max() ?? 0, mean), scenarios: scenarios, heapPath: heapPath, trimAvailable: trim != nil)
    }

    private static func fill(_ cache: Cache, consumer: Int, sizes: [Int]) {
        let first = consumer * entriesPerConsumer
        for key in 0..<entriesPerConsumer {
            let size = sizes[first + key]
            cache.setObject([UInt8](repeating: UInt8(truncatingIfNeeded: key), count: size), forKey: key, cost: size)
        }
    }

    private static func measure(name: String, target: Int, trimsHeap: Bool, sizes: [Int],
                                trim: (@convention(c) (UInt) -> Int32)?) throws -> Scenario {
        let coordinator = ReleaseCoordinator(trimsHeap: trimsHeap)
        let filling = monotonicNanoseconds()
        let caches = (0..<consumerCount).map { consumer in
            let cache = Cache(coordinator: coordinator)
            cache.name = "cache-\(consumer)"
            fill(cache, consumer: consumer, sizes: sizes)
            return cache
        }
        let fillNanoseconds = monotonicNanoseconds() - filling
        let held = caches.reduce(0) { $0 + $1.totalCost }
        guard held == totalBytes else { throw BenchmarkError("the caches hold \(held) bytes, not \(totalBytes)") }

        let rssBefore = residentBytes()
        let hugePagesBefore = anonymousHugePageBytes()
        let start = monotonicNanoseconds()
        let report = coordinator.release(level: .critical, targetBytes: target)
        let releaseNanoseconds = monotonicNanoseconds() - start
        let rssAfter = residentBytes()

        var trimNanoseconds: UInt64?
        var rssAfterTrim: Int?
        if !trimsHeap, let trim {
            let trimStart = monotonicNanoseconds()
            _ = trim(0)
            trimNanoseconds = monotonicNanoseconds() - trimStart
            rssAfterTrim = residentBytes()
        }
        withExtendedLifetime(caches) {}  // the coordinator holds them weakly
        return Scenario(name: name, targetBytes: target, trimsHeap: trimsHeap, fillNanoseconds: fillNanoseconds, heldBytes: held,
                        releaseNanoseconds: releaseNanoseconds, report: report, rssBefore: rssBefore, rssAfter: rssAfter, hugePagesBefore: hugePagesBefore,
                        trimNanoseconds: trimNanoseconds, rssAfterTrim: rssAfterTrim)
    }

    private static func measureHeapPath(sizes: [Int]) -> HeapPath {
        let cache = Cache(coordinator: nil)
        fill(cache, consumer: 0, sizes: sizes)
        let entriesBefore = cache.count, bytesBefore = cache.totalCost
        let target = bytesBefore / 2
        let start = monotonicNanoseconds()
        let freed = cache.release(ReleaseRequest(level: .critical, tier: .caches, targetBytes: target))
        let nanoseconds = monotonicNanoseconds() - start
        return HeapPath(entriesBefore: entriesBefore, entriesAfter: cache.count, bytesBefore: bytesBefore, targetBytes: target,
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
          let kilobytes = line.dropFirst(key.count + 1).split(separator: " ").first.flatMap({ Int($0.trimmingPrefix(while: { $0 == "\t" })) }) else { return 0 }
    return kilobytes * 1024
}

extension ReleaseBenchmark.Result {
    private func mib(_ bytes: Int) -> String { fixed(Double(bytes) / 1_048_576, 1) }
    private func ms(_ nanoseconds: UInt64) -> Double { Double(nanoseconds) / 1_000_000 }
    private func ms(_ duration: Duration) -> Double {
        let (seconds, attoseconds) = duration.components
        return Double(seconds) * 1_000 + Double(attoseconds) / 1_000_000_000_000_000
    }

    func scenario(_ name: String, trimsHeap: Bool) -> ReleaseBenchmark.Scenario? {
        scenarios.first { $0.name == name && $0.trimsHeap == trimsHeap }
    }

    /// Release time with `trimsHeap` minus release time without, for a scenario.
    func trimShare(_ name: String) -> Double? {
        guard let with = scenario(name, trimsHeap: true), let without = scenario(name, trimsHeap: false) else { return nil }
        return ms(with.releaseNanoseconds) - ms(without.releaseNanoseconds)
    }

    /// A consumer's entry in the caches tier took everything (the fast path) or part (the heap path).
    private func path(_ entry: ReleaseReport.Entry) -> String { entry.bytesAfter == 0 ? "whole" : "heap" }

    var report: String {
        var rows = [["release (.critical)", "trimsHeap", "release ms", "runs ms", "freed MiB", "RSS before MiB", "on huge pages MiB", "RSS after MiB", "then malloc_trim ms", "RSS after trim MiB"]]
        func runs(_ values: [UInt64]) -> String { values.map { fixed(ms($0), 1) }.joined(separator: " ") }
        for scenario in scenarios {
            rows.append([
                scenario.name == "everything" ? "everything (Int.max)" : scenario.name, String(scenario.trimsHeap), fixed(ms(scenario.releaseNanoseconds), 2),
                runs(scenario.runsReleaseNanoseconds), mib(scenario.report.freedBytes), mib(scenario.rssBefore), mib(scenario.hugePagesBefore), mib(scenario.rssAfter),
                scenario.trimNanoseconds.map { fixed(ms($0), 2) } ?? "", scenario.rssAfterTrim.map(mib) ?? "",
            ])
        }
        rows.append(["heap path alone (1 cache, half)", "n/a", fixed(ms(heapPath.nanoseconds), 2), runs(heapPath.runsNanoseconds), mib(heapPath.freedBytes), "", "", "", "", ""])

        var lines: [String] = []
        if let full = scenario("everything", trimsHeap: true) {
            let verdict = ms(full.releaseNanoseconds) < ReleaseBenchmark.goalMilliseconds ? "met" : "NOT met"
            lines.append("goal: 1 GiB release < \(fixed(ReleaseBenchmark.goalMilliseconds, 0)) ms with trimsHeap: \(verdict) (\(fixed(ms(full.releaseNanoseconds), 2)) ms)")
        }
        for name in ["everything", "512 MiB"] {
            if let share = trimShare(name), let trims = scenario(name, trimsHeap: false)?.runsTrimNanoseconds, !trims.isEmpty {
                lines.append("malloc_trim share, \(name): \(fixed(share, 2)) ms (median with − median without); malloc_trim(0) alone after each no-trim release: \(trims.map { fixed(ms($0), 1) }.joined(separator: ", ")) ms")
            }
        }
        if let partial = scenario("512 MiB", trimsHeap: true) {
            let asked = partial.report.entries.filter { $0.tier == .caches }
            let whole = asked.filter { path($0) == "whole" }
            let heap = asked.filter { path($0) == "heap" }
            var line = "512 MiB, largest first: \(whole.count) caches cleared whole in \(fixed(ms(whole.reduce(Duration.zero) { $0 + $1.duration }), 2)) ms"
            for entry in heap {
                line += "; \(entry.consumer) by the heap path: \(mib(entry.bytesFreed)) of \(mib(entry.bytesBefore)) MiB in \(fixed(ms(entry.duration), 2)) ms"
            }
            lines.append(line)
        }
        lines.append("heap path alone: \(heapPath.entriesBefore - heapPath.entriesAfter) of \(heapPath.entriesBefore) entries, \(mib(heapPath.freedBytes)) MiB for a target of \(mib(heapPath.targetBytes)) MiB, no trim")
        let fills = scenarios.map { fixed(ms($0.fillNanoseconds), 0) }.joined(separator: ", ")

        return """
        release: \(ReleaseBenchmark.consumerCount) DiscardableCache<Int, [UInt8]> on a private ReleaseCoordinator, \(ReleaseBenchmark.consumerCount * ReleaseBenchmark.entriesPerConsumer) entries, heap: \(heap),
        \(ReleaseBenchmark.totalBytes) bytes in all (entry \(sizes.min)–\(sizes.max) B, mean \(fixed(sizes.mean, 1)) B; cost = byte count);
        a fresh fill for every measurement; each row is the median of \(ReleaseBenchmark.runs) runs by release time
        (its RSS, trim and fill figures are that run's; fill ms: \(fills))

        \(table(rows))

        \(lines.joined(separator: "\n"))
        """ + (trimAvailable ? "" : "\n(malloc_trim not found: no separate trim figures)")
    }

    var json: JSON {
        func scenarioJSON(_ scenario: ReleaseBenchmark.Scenario) -> JSON {
            var members: [(String, JSON)] = [
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
            if let trim = scenario.trimNanoseconds { members.append(("then_malloc_trim_ms", .double(ms(trim), digits: 3))) }
            if !scenario.runsTrimNanoseconds.isEmpty {
                members.append(("runs_then_malloc_trim_ms", .array(scenario.runsTrimNanoseconds.map { .double(ms($0), digits: 3) })))
            }
            if let rss = scenario.rssAfterTrim { members.append(("rss_after_trim_bytes", .number(rss))) }
            return .object(members)
        }
        let null = JSON.double(.nan, digits: 0)  // a non-finite double prints as null
        let full = scenario("everything", trimsHeap: true)
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
            ("trim_share_everything_ms", trimShare("everything").map { .double($0, digits: 3) } ?? null),
            ("trim_share_512mib_ms", trimShare("512 MiB").map { .double($0, digits: 3) } ?? null),
            ("heap_path_alone", .object([
                ("entries_before", .number(heapPath.entriesBefore)),
                ("entries_after", .number(heapPath.entriesAfter)),
                ("bytes_before", .number(heapPath.bytesBefore)),
                ("target_bytes", .number(heapPath.targetBytes)),
                ("freed_bytes", .number(heapPath.freedBytes)),
                ("ms", .double(ms(heapPath.nanoseconds), digits: 3)),
                ("runs_ms", .array(heapPath.runsNanoseconds.map { .double(ms($0), digits: 3) })),
            ])),
            ("runs", .number(ReleaseBenchmark.runs)),
            ("goal_full_release_ms", .double(ReleaseBenchmark.goalMilliseconds, digits: 0)),
            ("goal_met", full.map { .bool(ms($0.releaseNanoseconds) < ReleaseBenchmark.goalMilliseconds) } ?? null),
        ])
    }
}

import Foundation
import Logging
import Memwarn
import MemwarnTestKit
import Synchronization

/// How long after usage crosses the warning mark each reader learns of it, side by side on the
/// same crossings: the ``PressureMonitor`` on cgroup v1 events (in this process, as root: usage
/// thresholds, and the guard bands below the marks for crossings the kernel does not report),
/// the same monitor sampling usage adaptively (`memwarn watch` run as nobody, who may not
/// register thresholds: the path of cgroup v2 and of hosts without a limit), and a thread that
/// reads the usage every 100 ms.
///
/// Every crossing counts, however late it is found: a reader's latency is measured to the first
/// report of it, with no cut-off but a 5 s bound after which it counts as not found. A report
/// older than the crossing (a late report of the one before) is skipped, never taken for this one.
struct LatencyBenchmark {
    static let limit: UInt64 = 64 << 20
    /// Where each cycle starts, well below the recovery mark, so every reader goes back to `.normal`.
    static let lowFraction = 0.60
    /// How far below the warning mark the hog waits before the final step: below it, so no event.
    static let belowMark = 1 << 20
    /// How far above the warning mark the final step ends, by default (`--above KIB`): 512 KiB,
    /// about 128 pages past the mark. A smaller step leaves more crossings unreported by the
    /// kernel, for the guard bands to find.
    static let defaultAboveMark = 512 << 10
    /// How long to wait for a reader's report before counting the crossing as not found.
    static let giveUpAfter: Duration = .seconds(5)
    /// A report later than this (50 ms) counts as late: the first look missed it.
    static let lateAfterNanoseconds: Int64 = 50_000_000

    var crossings: Int
    /// How far above the warning mark the final step ends, in bytes.
    var aboveMark = LatencyBenchmark.defaultAboveMark
    /// The `memwarn` executable for the sampling reader (`MEMWARN_CLI`).
    var cli: String

    /// What one reader reported, stamped on arrival.
    struct Report: Sendable {
        var isRaised: Bool
        var source: String
        var ratio: Double?
        var nanoseconds: UInt64
    }

    /// One reader's reports, appended as they arrive, and looked through by the benchmark.
    final class Reports: Sendable {
        private let reports = Mutex<[Report]>([])

        func append(_ report: Report) { reports.withLock { $0.append(report) } }
        var latest: Report? { reports.withLock { $0.last } }

        /// The first raised report at or after `start`, waiting up to ``LatencyBenchmark/giveUpAfter``;
        /// `stale` counts raised reports before `start` met on the way.
        func firstRaised(after start: UInt64, from index: inout Int, stale: inout Int) async throws -> Report? {
            let deadline = ContinuousClock.now + LatencyBenchmark.giveUpAfter
            while ContinuousClock.now < deadline {
                let next = reports.withLock { reports -> [Report] in Array(reports[min(index, reports.count)...]) }
                for report in next {
                    index += 1
                    guard report.isRaised else { continue }
                    if report.nanoseconds < start {
                        stale += 1
                        continue
                    }
                    return report
                }
                try await Task.sleep(for: .milliseconds(1))
            }
            return nil
        }

        /// Waits until the latest report is not raised.
        func waitUntilLowered(_ what: String) async throws {
            let deadline = ContinuousClock.now + .seconds(30)
            while latest?.isRaised != false {
                guard ContinuousClock.now < deadline else { throw BenchmarkError("\(what) did not report usage below the mark within 30 s") }
                try await Task.sleep(for: .milliseconds(1))
            }
        }

        var count: Int { reports.withLock { $0.count } }
    }

    /// One reader's results.
    struct ReaderResult {
        var name: String
        var latencies: LatencySummary
        var notFound: Int
        var late: Int
        var stale: Int
        var sources: [String: Int]
        var notes: [String]
    }

    struct Result {
        var crossings: Int
        var overhead: Int
        var lowBytes: Int
        var belowBytes: Int
        var aboveBytes: Int
        var threshold: UInt64
        var readers: [ReaderResult]
        var finalStep: LatencySummary
        /// The cgroup's usage read just before each final step, lowest and highest.
        var usageBelow: ClosedRange<UInt64>
        var thresholdsAfter: Duration?
    }

    func run(progress: @Sendable (Int) -> Void) async throws -> Result {
        try await withTestCgroup(limit: Self.limit) { cgroup in
            let hog = try MemoryHog()
            defer { hog.terminate() }
            try cgroup.add(pid: hog.pid)
            // What the cgroup holds besides the hog's memory, measured once.
            let empty = try hog.hold(0)
            let overhead = Int(try cgroup.usage()) - empty.bytes
            let lowBytes = Int(Double(Self.limit) * Self.lowFraction) - overhead

            var configuration = MonitorConfiguration(cgroupPath: cgroup.location.directory, environment: [:])
            configuration.policy.holdTime = .zero
            configuration.watchesPressureStall = false
            // The monitor's own mark, computed as the monitor computes it.
            let threshold = UInt64(Double(Self.limit) * configuration.policy.warningRatio)
            let belowBytes = Int(threshold) - Self.belowMark - overhead
            let aboveBytes = Int(threshold) + aboveMark - overhead

            let events = Reports(), sampled = Reports(), polled = Reports()
            let armedAt = ContinuousClock.now
            let monitor = PressureMonitor(configuration: configuration, logger: quietLogger)
            monitor.addObserver { event in
                events.append(Report(isRaised: event.level >= .warning, source: event.source.name, ratio: event.snapshot.ratio,
                                     nanoseconds: ChildProcess.monotonicNanoseconds()))
            }
            let running = Task { try await monitor.run() }
            let watch = try SampledWatch(cli: cli, cgroupPath: cgroup.location.path, environment: [
                "MEMWARN_HOLD_TIME": "0ms", "MEMWARN_PSI_SOME_WARNING_PERCENT": "100", "MEMWARN_PSI_FULL_CRITICAL_PERCENT": "100",
            ])
            let poller = PollingReader(location: cgroup.location, threshold: threshold)
            let pollForwarding = Task {
                for await seen in poller.observations {
                    polled.append(Report(isRaised: seen.isAbove, source: "poll", ratio: Double(seen.usage) / Double(Self.limit), nanoseconds: seen.nanoseconds))
                }
            }
            let watchForwarding = Task {
                var taken = 0
                while !Task.isCancelled {
                    let all = watch.observations
                    for line in all.dropFirst(taken) { sampled.append(Report(isRaised: line.isRaised, source: line.source, nanoseconds: line.nanoseconds)) }
                    taken = all.count
                    try? await Task.sleep(for: .microseconds(200))
                }
            }
            defer {
                poller.stop()
                watch.stop()
                running.cancel()
                pollForwarding.cancel()
                watchForwarding.cancel()
            }
            // The monitor's usage thresholds follow arming (the kernel takes an RCU grace period for each).
            while monitor.usageWatchName != "thresholds" {
                guard ContinuousClock.now - armedAt < .seconds(10) else { throw BenchmarkError("the usage thresholds were not registered within 10 s") }
                try await Task.sleep(for: .milliseconds(5))
            }
            let thresholdsAfter = ContinuousClock.now - armedAt
            poller.start()

            let readers: [(name: String, reports: Reports)] = [
                ("PressureMonitor, v1 events (root, in process)", events),
                ("PressureMonitor, adaptive sampling (memwarn watch as nobody)", sampled),
                ("100 ms polling reader", polled),
            ]
            var latencies = Array(repeating: [Int64](), count: readers.count)
            var notFound = Array(repeating: 0, count: readers.count)
            var late = Array(repeating: 0, count: readers.count)
            var stale = Array(repeating: 0, count: readers.count)
            var sources = Array(repeating: [String: Int](), count: readers.count)
            var cursors = Array(repeating: 0, count: readers.count)
            var finalStep: [Int64] = []
            var lowestBelow = UInt64.max, highestBelow = UInt64.min
            var random = SystemRandomNumberGenerator()
            for crossing in 1...crossings {
                // 1. Back below the recovery mark, and every reader knows it.
                try hog.hold(lowBytes)
                for reader in readers { try await reader.reports.waitUntilLowered(reader.name) }
                // 2. Just below the mark: nobody reports anything. Usage is checked, so that a drift
                // of the overhead cannot make the step below cross the mark unnoticed.
                try hog.hold(belowBytes)
                let below = try cgroup.usage()
                guard below < threshold else {
                    throw BenchmarkError("usage \(below) is already at the warning mark \(threshold) before the final step (crossing \(crossing))")
                }
                lowestBelow = min(lowestBelow, below)
                highestBelow = max(highestBelow, below)
                // A uniform random pause gives the pollers an arbitrary phase, as in a real application.
                try await Task.sleep(for: .nanoseconds(Int64.random(in: 0..<100_000_000, using: &random)))
                for index in readers.indices { cursors[index] = readers[index].reports.count }

                // 3. A small final step across the mark; t0 is when the hog started it.
                let held = try hog.hold(aboveBytes)
                let start = held.startNanoseconds
                finalStep.append(Int64(held.endNanoseconds) - Int64(start))
                for (index, reader) in readers.enumerated() {
                    guard let report = try await reader.reports.firstRaised(after: start, from: &cursors[index], stale: &stale[index]) else {
                        notFound[index] += 1
                        continue
                    }
                    let latency = Int64(report.nanoseconds) - Int64(start)
                    latencies[index].append(latency)
                    if latency > Self.lateAfterNanoseconds { late[index] += 1 }
                    sources[index][report.source, default: 0] += 1
                }
                progress(crossing)
            }
            try hog.hold(0)
            var results: [ReaderResult] = []
            for (index, reader) in readers.enumerated() {
                var notes: [String] = []
                if index == 0 { notes = monitor.sourcesWatched.filter { $0.hasPrefix("sample") } }
                results.append(ReaderResult(name: reader.name, latencies: LatencySummary(latencies[index]), notFound: notFound[index], late: late[index],
                                            stale: stale[index], sources: sources[index], notes: notes))
            }
            return Result(crossings: crossings, overhead: overhead, lowBytes: lowBytes, belowBytes: belowBytes, aboveBytes: aboveBytes,
                          threshold: threshold, readers: results, finalStep: LatencySummary(finalStep),
                          usageBelow: lowestBelow...highestBelow, thresholdsAfter: thresholdsAfter)
        }
    }
}

extension LatencyBenchmark.Result {
    var report: String {
        func row(_ name: String, _ summary: LatencySummary, _ extra: [String]) -> [String] {
            [name, String(summary.count), fixed(milliseconds(summary.percentile(50))), fixed(milliseconds(summary.percentile(99))),
             fixed(milliseconds(summary.max)), fixed(milliseconds(summary.mean)), fixed(milliseconds(summary.min))] + extra
        }
        let limit = LatencyBenchmark.limit
        var rows = [["reader", "n", "p50 ms", "p99 ms", "max ms", "mean ms", "min ms", "later than 50 ms", "not found in 5 s"]]
        for reader in readers { rows.append(row(reader.name, reader.latencies, [String(reader.late), String(reader.notFound)])) }
        rows.append(row("(hog's final step, start -> end)", finalStep, ["", ""]))
        let sourceLines = readers.map { reader in
            "  \(reader.name): " + reader.sources.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
                + (reader.stale > 0 ? "; \(reader.stale) stale report(s) of an earlier crossing skipped" : "")
        }
        return """
        latency: \(crossings) crossings of the warning mark (\(threshold) bytes, 80% of a \(limit >> 20) MiB limit), every crossing counted
        each: hog at \(Int(LatencyBenchmark.lowFraction * 100))% of the limit until every reader is back below the mark, then mark - \(LatencyBenchmark.belowMark >> 10) KiB, then a final step to mark + \((aboveBytes + overhead - Int(threshold)) >> 10) KiB
        hog holds \(lowBytes) -> \(belowBytes) -> \(aboveBytes) bytes (cgroup overhead \(overhead) bytes; usage before the final step \(usageBelow.lowerBound)...\(usageBelow.upperBound))
        latency = reader's CLOCK_MONOTONIC on receipt - hog's CLOCK_MONOTONIC just before it started the final step
        (the sampling reader is another process: its latency includes its JSON line through a pipe)
        the in-process monitor's usage thresholds were registered \(thresholdsAfter.map { "\(fixed(Double($0.components.seconds) + Double($0.components.attoseconds) / 1e18, 3)) s" } ?? "?") after arming; crossings began after

        \(table(rows))

        what found each crossing:
        \(sourceLines.joined(separator: "\n"))
        """
    }

    var json: JSON {
        func summary(_ summary: LatencySummary, extra: [(String, JSON)] = []) -> JSON {
            .object([
                ("n", .number(summary.count)),
                ("p50_ms", .double(milliseconds(summary.percentile(50)), digits: 6)),
                ("p99_ms", .double(milliseconds(summary.percentile(99)), digits: 6)),
                ("max_ms", .double(milliseconds(summary.max), digits: 6)),
                ("mean_ms", .double(milliseconds(summary.mean), digits: 6)),
                ("min_ms", .double(milliseconds(summary.min), digits: 6)),
            ] + extra + [("samples_ns", .array(summary.samples.map { .int($0) }))])
        }
        return .object([
            ("benchmark", .string("latency")),
            ("crossings", .number(crossings)),
            ("limit_bytes", .number(LatencyBenchmark.limit)),
            ("warning_threshold_bytes", .number(threshold)),
            ("overhead_bytes", .number(overhead)),
            ("hog_low_bytes", .number(lowBytes)),
            ("hog_below_mark_bytes", .number(belowBytes)),
            ("hog_above_mark_bytes", .number(aboveBytes)),
            ("usage_before_step_min_bytes", .number(usageBelow.lowerBound)),
            ("usage_before_step_max_bytes", .number(usageBelow.upperBound)),
            ("readers", .array(readers.map { reader in
                summary(reader.latencies, extra: [
                    ("name", .string(reader.name)),
                    ("later_than_50ms", .number(reader.late)),
                    ("not_found_in_5s", .number(reader.notFound)),
                    ("stale_reports_skipped", .number(reader.stale)),
                    ("sources", .object(reader.sources.sorted { $0.key < $1.key }.map { ($0.key, .number($0.value)) })),
                ])
            })),
            ("hog_final_step", summary(finalStep)),
        ])
    }
}

/// The monitor logs every level change; the benchmark measures, it does not log.
let quietLogger = Logger(label: "memwarn.bench", factory: { _ in SwiftLogNoOpLogHandler() })

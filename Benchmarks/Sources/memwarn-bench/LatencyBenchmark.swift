import CgroupKit
import Logging
import Memwarn
import MemwarnTestKit

/// How long after usage crosses the warning mark each reader learns of it: the event-driven
/// ``PressureMonitor`` (a kernel usage threshold on `memory.usage_in_bytes`) and a thread
/// that polls the same file every 100 ms, side by side on the same crossings.
struct LatencyBenchmark {
    static let limit: UInt64 = 64 << 20
    /// Where each cycle starts, well below the recovery mark, so the monitor goes back to `.normal`.
    static let lowFraction = 0.60
    /// How far below the warning mark the hog waits before the final step: below it, so no event.
    static let belowMark = 1 << 20
    /// How far above the warning mark the final step ends.
    static let aboveMark = 512 << 10
    /// How long to wait for the monitor's `.warning` before counting the crossing as missed.
    static let missAfter: Duration = .seconds(1)

    var crossings: Int

    /// What the monitor's observer saw, stamped on arrival; or, when `deadlineOf` is set, the benchmark's
    /// own note that the monitor had not reported that crossing within ``missAfter``.
    struct MonitorObservation: Sendable {
        var level: MemoryPressureLevel
        var source: String
        var ratio: Double
        var nanoseconds: UInt64
        var deadlineOf: Int? = nil
    }

    struct Result {
        var crossings: Int
        var overhead: Int
        var lowBytes: Int
        var belowBytes: Int
        var aboveBytes: Int
        var threshold: UInt64
        var monitor: LatencySummary
        var poller: LatencySummary
        var finalStep: LatencySummary
        /// The cgroup's usage read just before each final step, lowest and highest.
        var usageBelow: ClosedRange<UInt64>
        /// Crossings the monitor did not report within ``LatencyBenchmark/missAfter``.
        var missed: [Int]
        var monitorSources: [String: Int]
        var warningRatios: ClosedRange<Double>
        var pollerReads: Int
        var pollerFailures: Int
        var watchedSources: [String]
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

            var configuration = MonitorConfiguration(cgroupPath: cgroup.location.directory)
            configuration.policy.holdTime = .zero
            configuration.watchesPressureStall = false
            // The monitor's own mark, computed as the monitor computes it.
            let threshold = UInt64(Double(Self.limit) * configuration.policy.warningRatio)
            let belowBytes = Int(threshold) - Self.belowMark - overhead
            let aboveBytes = Int(threshold) + Self.aboveMark - overhead
            let monitor = PressureMonitor(configuration: configuration, logger: quietLogger)
            let (monitorStream, monitorContinuation) = AsyncStream.makeStream(of: MonitorObservation.self)
            monitor.addObserver { event in
                let now = monotonicNanoseconds()
                monitorContinuation.yield(MonitorObservation(level: event.level, source: event.source.name, ratio: event.snapshot.ratio, nanoseconds: now))
            }
            let poller = PollingReader(location: cgroup.location, threshold: threshold)
            let running = Task { try await monitor.run() }
            do {
                var monitorEvents = monitorStream.makeAsyncIterator()
                var pollerEvents = poller.observations.makeAsyncIterator()
                var monitorLevel = try await next(&monitorEvents, waitingFor: "initial monitor event").level
                let watched = monitor.watchedSources
                poller.start()
                var pollerAbove = try await next(&pollerEvents, waitingFor: "first poll").isAbove

                var monitorLatencies: [Int64] = []
                var pollerLatencies: [Int64] = []
                var finalStep: [Int64] = []
                var missed: [Int] = []
                var lowestBelow = UInt64.max
                var highestBelow = UInt64.min
                var sources: [String: Int] = [:]
                var lowestRatio = Double.infinity
                var highestRatio = -Double.infinity
                var random = SystemRandomNumberGenerator()
                for crossing in 1...crossings {
                    // 1. Back to normal, and both readers know it.
                    try hog.hold(lowBytes)
                    while monitorLevel != .normal {
                        let event = try await next(&monitorEvents, waitingFor: "monitor .normal event")
                        if event.deadlineOf == nil { monitorLevel = event.level }
                    }
                    while pollerAbove {
                        pollerAbove = try await next(&pollerEvents, waitingFor: "poller below the mark").isAbove
                    }
                    // 2. Just below the mark: past the recovery mark, but from .normal that changes nothing,
                    // so neither reader reports anything. Usage is checked so that a drift in the cgroup's
                    // overhead cannot make the step below cross the mark unnoticed.
                    try hog.hold(belowBytes)
                    let below = try cgroup.usage()
                    guard below < threshold else {
                        throw BenchmarkError("usage \(below) is already at the warning mark \(threshold) before the final step (crossing \(crossing))")
                    }
                    lowestBelow = min(lowestBelow, below)
                    highestBelow = max(highestBelow, below)
                    // The step would otherwise follow a poll by a fixed few microseconds whenever the
                    // poller was the last to report: a uniform random delay makes its phase arbitrary,
                    // as it is for a real application.
                    try await Task.sleep(for: .nanoseconds(Int64.random(in: 0..<100_000_000, using: &random)))

                    // 3. A small final step across the mark; t0 is when the hog started it.
                    let held = try hog.hold(aboveBytes)
                    let start = held.startNanoseconds
                    finalStep.append(Int64(held.endNanoseconds) - Int64(start))
                    // Waiting on the stream with a timeout would cancel it (and end it), so a miss is
                    // noted by putting a marker for this crossing into the same stream after missAfter.
                    let deadline = Task {
                        try await Task.sleep(for: Self.missAfter)
                        monitorContinuation.yield(MonitorObservation(level: .normal, source: "", ratio: 0, nanoseconds: monotonicNanoseconds(), deadlineOf: crossing))
                    }
                    var warning: MonitorObservation
                    repeat {
                        warning = try await next(&monitorEvents, waitingFor: "monitor .warning event (crossing \(crossing))")
                        if warning.deadlineOf == crossing { break }
                        if warning.deadlineOf == nil { monitorLevel = warning.level }
                    } while warning.deadlineOf != nil || warning.level < .warning
                    deadline.cancel()
                    if warning.deadlineOf == crossing {
                        missed.append(crossing)
                    } else {
                        guard warning.nanoseconds >= start else {
                            throw BenchmarkError("the monitor reported .warning before the final step (crossing \(crossing))")
                        }
                        monitorLatencies.append(Int64(warning.nanoseconds) - Int64(start))
                        sources[warning.source, default: 0] += 1
                        lowestRatio = min(lowestRatio, warning.ratio)
                        highestRatio = max(highestRatio, warning.ratio)
                    }
                    var seen: PollingReader.Observation
                    repeat {
                        seen = try await next(&pollerEvents, waitingFor: "poller above the mark (crossing \(crossing))")
                        pollerAbove = seen.isAbove
                    } while !seen.isAbove
                    guard seen.nanoseconds >= start else {
                        throw BenchmarkError("the poller saw usage above the mark before the final step (crossing \(crossing))")
                    }
                    pollerLatencies.append(Int64(seen.nanoseconds) - Int64(start))
                    progress(crossing)
                }
                try hog.hold(0)
                poller.stop()
                running.cancel()
                try await running.value
                return Result(
                    crossings: crossings, overhead: overhead, lowBytes: lowBytes, belowBytes: belowBytes, aboveBytes: aboveBytes,
                    threshold: threshold, monitor: LatencySummary(monitorLatencies), poller: LatencySummary(pollerLatencies),
                    finalStep: LatencySummary(finalStep), usageBelow: lowestBelow...highestBelow, missed: missed, monitorSources: sources, warningRatios: lowestRatio <= highestRatio ? lowestRatio...highestRatio : 0...0,
                    pollerReads: poller.reads, pollerFailures: poller.failures, watchedSources: watched)
            } catch {
                poller.stop()
                running.cancel()
                _ = await running.result
                throw error
            }
        }
    }
}

extension LatencyBenchmark.Result {
    var report: String {
        func row(_ name: String, _ summary: LatencySummary) -> [String] {
            [name, String(summary.count), fixed(milliseconds(summary.percentile(50))), fixed(milliseconds(summary.percentile(99))),
             fixed(milliseconds(summary.max)), fixed(milliseconds(summary.mean)), fixed(milliseconds(summary.min))]
        }
        let limit = LatencyBenchmark.limit
        return """
        latency: \(crossings) crossings of the warning mark (\(threshold) bytes, 80% of a \(limit >> 20) MiB limit)
        each: hog at \(Int(LatencyBenchmark.lowFraction * 100))% of the limit until both readers are back below the mark, then mark - \(LatencyBenchmark.belowMark >> 10) KiB, then a final step to mark + \(LatencyBenchmark.aboveMark >> 10) KiB
        hog holds \(lowBytes) -> \(belowBytes) -> \(aboveBytes) bytes (cgroup overhead \(overhead) bytes; usage before the final step \(usageBelow.lowerBound)...\(usageBelow.upperBound))
        latency = reader's CLOCK_MONOTONIC on receipt - hog's CLOCK_MONOTONIC just before it started the final step

        \(table([
            ["reader", "n", "p50 ms", "p99 ms", "max ms", "mean ms", "min ms"],
            row("PressureMonitor observer (.warning)", monitor),
            row("100 ms polling reader", poller),
            row("(hog's final step, start -> end)", finalStep),
        ]))

        monitor missed \(missed.count) of \(crossings) crossings (no .warning within \(LatencyBenchmark.missAfter))\(missed.isEmpty ? "" : ": " + missed.map(String.init).joined(separator: ", "))
        monitor .warning sources: \(monitorSources.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")); usage at the event \(fixed(warningRatios.lowerBound * 100, 1))%...\(fixed(warningRatios.upperBound * 100, 1))% of the limit
        poller: \(pollerReads) reads, \(pollerFailures) failed
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
            ("poll_interval_ms", .number(100)),
            ("monitor", summary(monitor, extra: [
                ("sources", .object(monitorSources.sorted { $0.key < $1.key }.map { ($0.key, .number($0.value)) })),
                ("usage_ratio_min", .double(warningRatios.lowerBound, digits: 4)),
                ("usage_ratio_max", .double(warningRatios.upperBound, digits: 4)),
                ("watched_sources", .array(watchedSources.map { .string($0) })),
                ("missed", .number(missed.count)),
                ("missed_crossings", .array(missed.map { .number($0) })),
            ])),
            ("poller", summary(poller, extra: [("reads", .number(pollerReads)), ("failed_reads", .number(pollerFailures))])),
            ("hog_final_step", summary(finalStep)),
        ])
    }
}

/// The monitor logs every level change; the benchmark measures, it does not log.
let quietLogger = Logger(label: "memwarn.bench", factory: { _ in SwiftLogNoOpLogHandler() })

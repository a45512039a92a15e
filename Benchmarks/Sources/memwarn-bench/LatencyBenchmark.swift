import CgroupKit
import Logging
import Memwarn
import MemwarnTestKit

/// How long after usage crosses the warning mark each reader learns of it: the event-driven
/// ``PressureMonitor`` (a kernel usage threshold on `memory.usage_in_bytes`) and a thread
/// that polls the same file every 100 ms, side by side on the same crossings.
struct LatencyBenchmark {
    static let limit: UInt64 = 64 << 20
    static let lowFraction = 0.60
    static let highFraction = 0.85

    var crossings: Int

    /// What the monitor's observer saw, stamped on arrival.
    struct MonitorObservation: Sendable {
        var level: MemoryPressureLevel
        var source: String
        var ratio: Double
        var nanoseconds: UInt64
    }

    struct Result {
        var crossings: Int
        var overhead: Int
        var lowBytes: Int
        var highBytes: Int
        var threshold: UInt64
        var monitor: LatencySummary
        var poller: LatencySummary
        var faultIn: LatencySummary
        var monitorFromCrossing: LatencySummary
        var pollerFromCrossing: LatencySummary
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
            let highBytes = Int(Double(Self.limit) * Self.highFraction) - overhead

            var configuration = MonitorConfiguration(cgroupPath: cgroup.location.directory)
            configuration.policy.holdTime = .zero
            configuration.watchesPressureStall = false
            // The monitor's own mark, computed as the monitor computes it.
            let threshold = UInt64(Double(Self.limit) * configuration.policy.warningRatio)
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
                var faultIn: [Int64] = []
                var crossingOffsets: [Int64] = []
                var sources: [String: Int] = [:]
                var lowestRatio = Double.infinity
                var highestRatio = -Double.infinity
                var random = SystemRandomNumberGenerator()
                for crossing in 1...crossings {
                    // Back to normal, and both readers know it.
                    let low = try hog.hold(lowBytes)
                    while monitorLevel != .normal {
                        monitorLevel = try await next(&monitorEvents, waitingFor: "monitor .normal event").level
                    }
                    while pollerAbove {
                        pollerAbove = try await next(&pollerEvents, waitingFor: "poller below the mark").isAbove
                    }
                    // The step would otherwise follow a poll by a fixed few microseconds whenever the
                    // poller was the last to report: a uniform random delay makes its phase arbitrary,
                    // as it is for a real application.
                    try await Task.sleep(for: .nanoseconds(Int64.random(in: 0..<100_000_000, using: &random)))

                    // Cross the warning mark; t0 is when the hog started growing.
                    let held = try hog.hold(highBytes)
                    let start = held.startNanoseconds
                    faultIn.append(Int64(held.endNanoseconds) - Int64(start))
                    // When usage passed the mark, assuming the hog touched its pages at an even pace.
                    let share = (Double(threshold) - Double(overhead + low.bytes)) / Double(held.bytes - low.bytes)
                    crossingOffsets.append(Int64(share * Double(held.endNanoseconds - start)))
                    var warning: MonitorObservation
                    repeat {
                        warning = try await next(&monitorEvents, waitingFor: "monitor .warning event (crossing \(crossing))")
                        monitorLevel = warning.level
                    } while warning.level < .warning
                    monitorLatencies.append(Int64(warning.nanoseconds) - Int64(start))
                    sources[warning.source, default: 0] += 1
                    lowestRatio = min(lowestRatio, warning.ratio)
                    highestRatio = max(highestRatio, warning.ratio)
                    var seen: PollingReader.Observation
                    repeat {
                        seen = try await next(&pollerEvents, waitingFor: "poller above the mark (crossing \(crossing))")
                        pollerAbove = seen.isAbove
                    } while !seen.isAbove
                    pollerLatencies.append(Int64(seen.nanoseconds) - Int64(start))
                    progress(crossing)
                }
                try hog.hold(0)
                poller.stop()
                running.cancel()
                try await running.value
                return Result(
                    crossings: crossings, overhead: overhead, lowBytes: lowBytes, highBytes: highBytes, threshold: threshold,
                    monitor: LatencySummary(monitorLatencies), poller: LatencySummary(pollerLatencies), faultIn: LatencySummary(faultIn),
                    monitorFromCrossing: LatencySummary(zip(monitorLatencies, crossingOffsets).map { $0 - $1 }),
                    pollerFromCrossing: LatencySummary(zip(pollerLatencies, crossingOffsets).map { $0 - $1 }),
                    monitorSources: sources, warningRatios: lowestRatio...highestRatio,
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
        hog \(Int(LatencyBenchmark.lowFraction * 100))% -> \(Int(LatencyBenchmark.highFraction * 100))% of the limit (holds \(lowBytes) -> \(highBytes) bytes; cgroup overhead \(overhead) bytes)
        latency = reader's CLOCK_MONOTONIC on receipt - hog's CLOCK_MONOTONIC before it started growing

        \(table([
            ["reader", "n", "p50 ms", "p99 ms", "max ms", "mean ms", "min ms"],
            row("PressureMonitor observer (.warning)", monitor),
            row("100 ms polling reader", poller),
            row("(hog growing 60% -> 85%, for scale)", faultIn),
        ]))

        the same, counted from when usage passed the mark (estimated: the hog's growth, interpolated linearly)
        \(table([
            ["reader", "n", "p50 ms", "p99 ms", "max ms", "mean ms", "min ms"],
            row("PressureMonitor observer (.warning)", monitorFromCrossing),
            row("100 ms polling reader", pollerFromCrossing),
        ]))

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
            ("hog_high_bytes", .number(highBytes)),
            ("poll_interval_ms", .number(100)),
            ("monitor", summary(monitor, extra: [
                ("sources", .object(monitorSources.sorted { $0.key < $1.key }.map { ($0.key, .number($0.value)) })),
                ("usage_ratio_min", .double(warningRatios.lowerBound, digits: 4)),
                ("usage_ratio_max", .double(warningRatios.upperBound, digits: 4)),
                ("watched_sources", .array(watchedSources.map { .string($0) })),
            ])),
            ("poller", summary(poller, extra: [("reads", .number(pollerReads)), ("failed_reads", .number(pollerFailures))])),
            ("hog_growth", summary(faultIn)),
            ("from_estimated_crossing", .object([
                ("monitor", summary(monitorFromCrossing)),
                ("poller", summary(pollerFromCrossing)),
            ])),
        ])
    }
}

/// The monitor logs every level change; the benchmark measures, it does not log.
let quietLogger = Logger(label: "memwarn.bench", factory: { _ in SwiftLogNoOpLogHandler() })

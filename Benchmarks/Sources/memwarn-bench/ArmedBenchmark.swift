import Foundation
import Memwarn
import MemwarnTestKit

/// Time-to-armed: from a service's `exec` to its monitor armed (cgroup found, sources registered,
/// first reading taken, release thread waiting), on the README's pattern. The service is
/// `memwarn-growth-probe` with nothing to insert, started into a 128 MiB test cgroup (it joins
/// between `fork` and `exec`) as root (cgroup v1 events; its thresholds register after arming) and
/// as nobody through `setpriv` (adaptive sampling); the two take turns. Its `armed` line carries
/// `CLOCK_MONOTONIC` when `main` began and when the monitor's initializer returned, which this
/// process compares with its own clock just before it started the child.
struct ArmedBenchmark {
    static let limit: UInt64 = 128 << 20
    var runs: Int
    var probe: String

    init(runs: Int) throws {
        guard let probe = ProcessInfo.processInfo.environment["MEMWARN_GROWTH_PROBE"], !probe.isEmpty else {
            throw BenchmarkError("armed needs MEMWARN_GROWTH_PROBE (memwarn-growth-probe, release build); Benchmarks/run builds and sets it")
        }
        self.runs = runs
        self.probe = probe
    }

    struct Sample {
        var execToMain: Int64
        var mainToArmed: Int64
        var arming: Int64
        var usageWatch: String
        var pendingThresholds: Int
        var execToArmed: Int64 { execToMain + mainToArmed }
    }

    struct Result {
        var runs: Int
        var samples: [(name: String, samples: [Sample])]
        /// In-process monitors on the same cgroup (root): how long registering their v1 usage
        /// thresholds took after arming, and how many there were.
        var registrations: [(took: Duration, count: Int)] = []
    }

    /// Arms `runs` monitors in this process on a 128 MiB test cgroup, one after the other, each
    /// until its usage thresholds are registered (the kernel waits for an RCU grace period in
    /// each registration), then lets it go.
    func registrations() async throws -> [(took: Duration, count: Int)] {
        try await withTestCgroup(limit: Self.limit) { cgroup in
            var measured: [(took: Duration, count: Int)] = []
            for _ in 0..<runs {
                var configuration = MonitorConfiguration(cgroupPath: cgroup.location.directory, environment: [:])
                configuration.watchesPressureStall = false
                let monitor = PressureMonitor(configuration: configuration, logger: quietLogger)
                let deadline = ContinuousClock.now + .seconds(10)
                while monitor.thresholdsRegisteredAfter == nil {
                    guard ContinuousClock.now < deadline else { throw BenchmarkError("thresholds not registered within 10 s") }
                    try await Task.sleep(for: .milliseconds(2))
                }
                if let took = monitor.thresholdsRegisteredAfter { measured.append((took, monitor.pendingThresholds)) }
            }
            return measured
        }
    }

    func run(progress: (String) -> Void) throws -> Result {
        var root: [Sample] = [], nobody: [Sample] = []
        let cgroup = try TestCgroup(limit: Self.limit)
        defer { try? cgroup.remove() }
        for index in 0..<runs {
            root.append(try once(asNobody: false, in: cgroup))
            nobody.append(try once(asNobody: true, in: cgroup))
            progress("armed: \(index + 1)/\(runs)")
        }
        return Result(runs: runs, samples: [("root (v1 events)", root), ("nobody (adaptive sampling)", nobody)])
    }

    private func once(asNobody: Bool, in cgroup: TestCgroup) throws -> Sample {
        let command = (asNobody ? ChildProcess.asNobody : []) + [probe, "--rate", "1", "--total", "0"]
        let started = ChildProcess.monotonicNanoseconds()
        let finished = try ChildProcess.run(command, in: cgroup, timeout: .seconds(60))
        guard finished.status == 0 else { throw BenchmarkError("the probe exited \(finished.status): \(finished.standardError)") }
        for line in finished.standardOutput.split(separator: "\n") {
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], object["event"] as? String == "armed",
                  let armed = (object["monotonicNanoseconds"] as? NSNumber)?.int64Value, let main = (object["mainNanoseconds"] as? NSNumber)?.int64Value,
                  let arming = (object["armingMicros"] as? NSNumber)?.int64Value else { continue }
            return Sample(execToMain: main - Int64(started), mainToArmed: armed - main, arming: arming * 1_000,
                          usageWatch: object["usageWatch"] as? String ?? "?", pendingThresholds: (object["pendingThresholds"] as? NSNumber)?.intValue ?? 0)
        }
        throw BenchmarkError("the probe printed no armed line: \(finished.standardOutput)")
    }
}

extension ArmedBenchmark.Result {
    var report: String {
        var rows = [["service run as", "measure", "p50 ms", "p90 ms", "max ms", "min ms"]]
        for (name, samples) in samples {
            for (measure, values) in [("exec -> armed", samples.map(\.execToArmed)), ("  exec -> main", samples.map(\.execToMain)),
                                      ("  main -> armed", samples.map(\.mainToArmed)), ("  the monitor's initializer", samples.map(\.arming))] {
                let summary = LatencySummary(values)
                rows.append([measure == "exec -> armed" ? name : "", measure, fixed(milliseconds(summary.percentile(50)), 2),
                             fixed(milliseconds(summary.percentile(90)), 2), fixed(milliseconds(summary.max), 2), fixed(milliseconds(summary.min), 2)])
            }
        }
        var registrationLine = ""
        if !registrations.isEmpty {
            let total = LatencySummary(registrations.map { nanoseconds($0.took) })
            let each = LatencySummary(registrations.map { nanoseconds($0.took) / Int64(max(1, $0.count)) })
            registrationLine = """

            v1 usage thresholds registered after arming (\(registrations.count) monitors in this process, root, \(registrations.first?.count ?? 0) thresholds each):
            all of them p50 \(fixed(milliseconds(total.percentile(50)), 1)) ms, p90 \(fixed(milliseconds(total.percentile(90)), 1)) ms, max \(fixed(milliseconds(total.max), 1)) ms; \
            one (their mean) p50 \(fixed(milliseconds(each.percentile(50)), 1)) ms, min \(fixed(milliseconds(each.min), 1)) ms, max \(fixed(milliseconds(each.max), 1)) ms
            """
        }
        let watches = samples.map { "\($0.name): " + Set($0.samples.map { "\($0.usageWatch) (\($0.pendingThresholds) thresholds pending)" }).sorted().joined(separator: ", ") }
        return """
        armed: \(runs) runs each of memwarn-growth-probe (README pattern, nothing to insert) in a \(ArmedBenchmark.limit >> 20) MiB test cgroup
        exec = this process's CLOCK_MONOTONIC just before it started the child; main = the probe's clock as main began;
        armed = the probe's clock when PressureMonitor's initializer returned (the service's first instruction comes after)

        \(table(rows))

        how usage reached the monitor when armed: \(watches.joined(separator: "; "))\(registrationLine)
        """
    }

    var json: JSON {
        .object([
            ("benchmark", .string("armed")),
            ("runs", .number(runs)),
            ("threshold_registrations", .array(registrations.map { registration in
                .object([("thresholds", .number(registration.count)),
                         ("ms", .double(milliseconds(nanoseconds(registration.took)), digits: 3))])
            })),
            ("paths", .array(samples.map { name, samples in
                func summary(_ values: [Int64]) -> JSON {
                    let summary = LatencySummary(values)
                    return .object([("p50_ms", .double(milliseconds(summary.percentile(50)), digits: 3)),
                                    ("p90_ms", .double(milliseconds(summary.percentile(90)), digits: 3)),
                                    ("max_ms", .double(milliseconds(summary.max), digits: 3))])
                }
                return .object([("name", .string(name)), ("exec_to_armed", summary(samples.map(\.execToArmed))),
                                ("exec_to_main", summary(samples.map(\.execToMain))), ("main_to_armed", summary(samples.map(\.mainToArmed))),
                                ("initializer", summary(samples.map(\.arming)))])
            })),
        ])
    }
}

/// A duration in whole nanoseconds.
private func nanoseconds(_ duration: Duration) -> Int64 {
    duration.components.seconds * 1_000_000_000 + duration.components.attoseconds / 1_000_000_000
}

import Foundation
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
        let command = (asNobody ? GrowthBenchmark.nobody : []) + [probe, "--rate", "1", "--total", "0"]
        let started = monotonicNanoseconds()
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
        let watches = samples.map { "\($0.name): " + Set($0.samples.map { "\($0.usageWatch) (\($0.pendingThresholds) thresholds pending)" }).sorted().joined(separator: ", ") }
        return """
        armed: \(runs) runs each of memwarn-growth-probe (README pattern, nothing to insert) in a \(ArmedBenchmark.limit >> 20) MiB test cgroup
        exec = this process's CLOCK_MONOTONIC just before it started the child; main = the probe's clock as main began;
        armed = the probe's clock when PressureMonitor's initializer returned (the service's first instruction comes after)

        \(table(rows))

        how usage reached the monitor when armed: \(watches.joined(separator: "; "))
        """
    }

    var json: JSON {
        .object([
            ("benchmark", .string("armed")),
            ("runs", .number(runs)),
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

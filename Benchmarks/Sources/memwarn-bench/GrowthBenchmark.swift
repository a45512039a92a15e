import Foundation
import MemwarnTestKit

/// `memwarn-bench growth`: whether a service holding only releasable memory survives growth,
/// under `memwarn run --memory-max`, for three releasers side by side in one run — memwarn's
/// release loop, the release before it (on a rise only, to the recovery mark, on the monitor's
/// thread) and a 100 ms poller that releases to the recovery mark at or above the warning mark.
/// The service is `memwarn-growth-probe` (default policy, one unlimited cache of 1 MiB entries,
/// `--total` MiB inserted at each rate); it survives (exit 0) or is OOM-killed (137).
struct GrowthBenchmark {
    static let releasers = ["memwarn", "rise-only", "poller"]
    var limitsMiB: [Int]
    var rates: [Int]
    var totalMiB: Int

    struct Outcome {
        var releaser: String
        var limitMiB: Int
        var rate: Int
        var status: Int32
        var releases: Int
        /// Seconds from the forecast warning to when usage would reach the warning mark at this rate.
        var forecastLead: Double?
        var falseForecasts: Int
        var survived: Bool { status == 0 }
    }

    func run(progress: (String) -> Void) throws -> (report: String, json: JSON) {
        guard let cli = ProcessInfo.processInfo.environment["MEMWARN_CLI"],
              let probe = ProcessInfo.processInfo.environment["MEMWARN_GROWTH_PROBE"] else {
            throw BenchmarkError("growth needs MEMWARN_CLI and MEMWARN_GROWTH_PROBE (Benchmarks/run sets them)")
        }
        var outcomes: [Outcome] = []
        for limit in limitsMiB {
            for rate in rates {
                for releaser in Self.releasers {
                    let result = try ChildProcess.run([cli, "run", "--memory-max", "\(limit)M", "--", probe,
                                                       "--rate", "\(rate)", "--total", "\(totalMiB)", "--releaser", releaser])
                    let events = result.standardOutput.split(separator: "\n").compactMap {
                        try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
                    }
                    let forecast = events.first { $0["event"] as? String == "level" && $0["source"] as? String == "forecast" }
                    let lead = (forecast?["usage"] as? Double).map { (0.8 * Double(limit << 20) - $0) / (Double(rate) * 1_048_576) }
                    let done = events.first { $0["event"] as? String == "done" }
                    let outcome = Outcome(releaser: releaser, limitMiB: limit, rate: rate, status: result.status,
                                          releases: events.filter { $0["event"] as? String == "release" && ($0["freed"] as? Int ?? 0) > 0 }.count,
                                          forecastLead: lead, falseForecasts: ((done?["forecasts"] as? [String: Any])?["false"] as? Int) ?? 0)
                    progress("\(limit) MiB, \(rate) MiB/s, \(releaser): \(outcome.survived ? "survived" : "exit \(result.status)")")
                    outcomes.append(outcome)
                }
            }
        }
        return (report(outcomes), json(outcomes))
    }

    /// The highest rate survived with every lower rate survived too, or `nil`.
    func highest(_ outcomes: [Outcome], releaser: String, limit: Int) -> Int? {
        var best: Int?
        for rate in rates.sorted() {
            guard outcomes.contains(where: { $0.releaser == releaser && $0.limitMiB == limit && $0.rate == rate && $0.survived }) else { break }
            best = rate
        }
        return best
    }

    private func report(_ outcomes: [Outcome]) -> String {
        var rows = [["releaser, limit"] + rates.map { "\($0) MiB/s" } + ["highest"]]
        for limit in limitsMiB {
            for releaser in Self.releasers {
                let cells = rates.map { rate in
                    outcomes.first { $0.releaser == releaser && $0.limitMiB == limit && $0.rate == rate }.map { $0.survived ? "ok" : ($0.status == 137 ? "OOM" : "exit \($0.status)") } ?? "-"
                }
                rows.append(["\(releaser), \(limit) MiB"] + cells + [highest(outcomes, releaser: releaser, limit: limit).map { "\($0) MiB/s" } ?? "none"])
            }
        }
        let leads = outcomes.compactMap(\.forecastLead)
        let falseWarnings = outcomes.filter { $0.releaser == "memwarn" }.reduce(0) { $0 + $1.falseForecasts }
        let leadText = leads.isEmpty ? "no forecast warning" :
            "forecast lead before the warning mark: \(fixed(leads.min()!, 2))–\(fixed(leads.max()!, 2)) s over \(leads.count) runs"
        return table(rows) + "\n\n" + leadText + "; false forecast warnings: \(falseWarnings)\n"
            + "(\(totalMiB) MiB inserted in 1 MiB entries a run; ok = exit 0, OOM = killed by the kernel, exit 137)"
    }

    private func json(_ outcomes: [Outcome]) -> JSON {
        .object([
            ("totalMiB", .number(totalMiB)),
            ("runs", .array(outcomes.map { outcome in
                .object([("releaser", .string(outcome.releaser)), ("limitMiB", .number(outcome.limitMiB)), ("rate", .number(outcome.rate)),
                         ("survived", .bool(outcome.survived)), ("exitStatus", .number(Int(outcome.status))), ("releases", .number(outcome.releases)),
                         ("forecastLeadSeconds", outcome.forecastLead.map { .double($0, digits: 3) } ?? .raw("null")), ("falseForecasts", .number(outcome.falseForecasts))])
            })),
            ("highest", .array(limitsMiB.flatMap { limit in Self.releasers.map { releaser in
                .object([("releaser", .string(releaser)), ("limitMiB", .number(limit)),
                         ("rate", highest(outcomes, releaser: releaser, limit: limit).map { .number($0) } ?? .raw("null"))])
            } })),
        ])
    }
}

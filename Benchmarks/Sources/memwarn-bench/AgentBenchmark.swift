import Foundation
import MemwarnTestKit
#if canImport(Glibc)
import Glibc
#endif

/// `memwarn-bench agent`: services sharing a limited parent cgroup, with the node agent
/// (`memwarn agent`) coordinating their releases beside each service releasing on its own, and
/// the counterfactual where nobody answers the parent. Each trial is MemwarnTestKit's
/// ``SharedParentTrial`` (as the shared-limit tests run it) in a fresh test parent
/// (`withTestCgroup`): `memwarn-growth-probe`s with control endpoints, each in a child cgroup of
/// its own with no limit, and in the second workload a sibling that does not link memwarn.
///
/// The coordinations take turns (agent, alone, own-limit-only, agent, ...) in every repeat, so
/// that whatever else the machine does falls on all alike. Nothing here is tuned per
/// coordination: the same services, the same parent, the same bounds.
struct AgentBenchmark {
    /// One set of services under one parent.
    struct Workload: Sendable {
        var name: String
        var limitMiB: Int
        var services: [SharedParentTrial.Service]
        /// A sibling that does not link memwarn (a `memwarn-hog`): its cgroup's name and the MiB it holds.
        var sibling: (name: String, holdMiB: Int)?
        /// Busy loops beside the services for the trial's length (a busy node).
        var cpuHogs = 0

        static let threeServices: [SharedParentTrial.Service] = [
            .init(name: "large", rateMiB: 60, totalMiB: 150), .init(name: "medium", rateMiB: 30, totalMiB: 90),
            .init(name: "small", rateMiB: 12, totalMiB: 45),
        ]
        /// Fast growth on a busy CPU, where the agent used to lose services that would each have
        /// survived on their own.
        static let fastServices: [SharedParentTrial.Service] = [
            .init(name: "large", rateMiB: 400, totalMiB: 800), .init(name: "medium", rateMiB: 300, totalMiB: 600),
            .init(name: "small", rateMiB: 200, totalMiB: 400),
        ]
        static let all = [
            Workload(name: "3 services, 256 MiB", limitMiB: 256, services: threeServices, sibling: nil),
            Workload(name: "3 + unlinked sibling, 320 MiB", limitMiB: 320, services: threeServices, sibling: ("sibling", 60)),
            Workload(name: "3 fast + 2 CPU hogs, 384 MiB", limitMiB: 384, services: fastServices, sibling: nil, cpuHogs: 2),
        ]
    }

    static let coordinations: [SharedParentTrial.Coordination] = [.agent, .alone, .ownLimitOnly]
    /// Each trial's own bound (SharedParentTrial's: every service must have ended by then). A
    /// trial takes about 8 s (1 s before the inserts, 3.75 s of the slowest's inserts, 2 s held).
    static let trialBound = Duration.seconds(60)

    var repeats: Int
    /// No trial starts after this many seconds from the benchmark's start: the run's bound is
    /// this plus one trial's bound (and its cleanup).
    var budgetSeconds: Double
    var workloads = Workload.all

    /// The figures of one trial.
    struct Run {
        var workload: Int
        var coordination: SharedParentTrial.Coordination
        var repeatIndex: Int
        var seconds: Double
        /// Why the trial failed (a process did not start or end in time), or `nil`.
        var failure: String?
        var services = 0
        var survivors = 0
        /// Services that ended by SIGKILL (exit status 137): the OOM killer's signal.
        var servicesKilled = 0
        /// The cgroups (below the parent) of the processes the kernel logged as OOM-killed; `nil`
        /// when its log could not be read.
        var oomVictims: [String]?
        var oomKills: Int? { oomVictims?.count }
        /// The outside recorder's episodes: durations in milliseconds, `nil` for one still open at the end.
        var episodes: [Double?] = []
        var parentPeakBytes: UInt64 = 0
        var limitBytes: UInt64 = 0
        /// What the services' releases freed, by their `release` lines, and how many lines.
        var releasedBytes = 0
        var releases = 0
        /// The agent's records (zero without an agent).
        var crossings = 0
        var relievedMilliseconds: [Double] = []
        var asks = 0
        var unanswered = 0
        var measuredFreedBytes: Int64 = 0
        var reportedFreedBytes: Int64 = 0

        var finishedEpisodes: [Double] { episodes.compactMap { $0 } }
        var openEpisodes: Int { episodes.filter { $0 == nil }.count }
    }

    /// Runs every trial (or as many as the budget allows), calling `progress` after each.
    func run(progress: @Sendable (String) -> Void) async throws -> Result {
        let products = try Self.products()
        let began = ContinuousClock.now
        var runs: [Run] = []
        var skipped = 0
        let total = repeats * workloads.count * Self.coordinations.count
        for repeatIndex in 0..<repeats {
            for (index, workload) in workloads.enumerated() {
                for coordination in Self.coordinations {
                    guard (ContinuousClock.now - began).inSeconds < budgetSeconds else {
                        skipped += 1
                        continue
                    }
                    let run = await trial(workload, index: index, coordination: coordination, repeatIndex: repeatIndex, products: products)
                    runs.append(run)
                    var line = "agent: [\(runs.count)/\(total)] \(workload.name), \(coordination.rawValue) #\(repeatIndex + 1): "
                    if let failure = run.failure {
                        line += "failed after \(fixed(run.seconds, 1)) s: \(failure)"
                    } else {
                        line += "\(run.survivors)/\(run.services) survived, \(run.oomKills.map(String.init) ?? "?") OOM kills, \(run.episodes.count) episodes, "
                            + "released \(fixed(Double(run.releasedBytes) / 1_048_576, 1)) MiB"
                            + (coordination == .agent ? ", \(run.asks) asks" : "") + ", \(fixed(run.seconds, 1)) s"
                    }
                    progress(line)
                }
            }
        }
        var detection: [AgentDetection.Result] = []
        for attacked in [false, true] {
            detection.append(await AgentDetection().run(memwarn: products.memwarn, attacked: attacked, progress: progress))
        }
        return Result(benchmark: self, runs: runs, skipped: skipped, seconds: (ContinuousClock.now - began).inSeconds, detection: detection)
    }

    /// One trial in a fresh parent; a failure is recorded, not thrown (the next trial goes on).
    private func trial(_ workload: Workload, index: Int, coordination: SharedParentTrial.Coordination, repeatIndex: Int,
                       products: (memwarn: String, probe: String)) async -> Run {
        var run = Run(workload: index, coordination: coordination, repeatIndex: repeatIndex, seconds: 0)
        let began = ContinuousClock.now
        do {
            let limit = UInt64(workload.limitMiB) << 20
            run.limitBytes = limit
            let log = OOMKillLog()
            let (outcome, victims) = try await withTestCgroup(limit: limit) { parent in
                var trial = SharedParentTrial(parent: parent, services: workload.services)
                (trial.memwarnPath, trial.probePath) = products
                trial.sibling = workload.sibling
                trial.cpuHogs = workload.cpuHogs
                let outcome = try await trial.run(coordination, bound: Self.trialBound)
                // The kernel writes its line before the kill: every kill of the trial is logged by now.
                return (outcome, log?.victims(under: parent.location.path))
            }
            run.read(outcome)
            run.oomVictims = victims
        } catch {
            run.failure = "\(error)".split(separator: "\n").first.map(String.init) ?? "\(error)"
        }
        run.seconds = (ContinuousClock.now - began).inSeconds
        return run
    }


    // MARK: The products

    /// The two executables SharedParentTrial runs, from `MEMWARN_CLI` and `MEMWARN_GROWTH_PROBE`
    /// (release builds of the root's products; `Benchmarks/run agent` builds and sets them).
    static func products() throws -> (memwarn: String, probe: String) {
        let environment = ProcessInfo.processInfo.environment
        guard let cli = environment["MEMWARN_CLI"], !cli.isEmpty, let probe = environment["MEMWARN_GROWTH_PROBE"], !probe.isEmpty else {
            throw BenchmarkError("agent needs MEMWARN_CLI and MEMWARN_GROWTH_PROBE (memwarn and memwarn-growth-probe, release builds); Benchmarks/run builds and sets them")
        }
        return (cli, probe)
    }

}

/// OOM kills, from the kernel's log (`/dev/kmsg`, readable by root): for each kill the kernel
/// writes an `oom-kill:` record naming the victim's cgroup (`task_memcg=`). On cgroup v1 the
/// parent's own `memory.oom_control` counts only kills of processes in the parent itself (none
/// here), and the children are gone with their counters when a trial returns.
private final class OOMKillLog {
    private let descriptor: Int32

    /// Opens the log at its end (records written before are not read); `nil` when it cannot be read.
    init?() {
        descriptor = open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        guard lseek(descriptor, 0, SEEK_END) >= 0 else {
            close(descriptor)
            return nil
        }
    }

    deinit { close(descriptor) }

    /// The victims' cgroups below `path` (their paths relative to it; `.` for `path` itself) in
    /// the records written since the log was opened.
    func victims(under path: String) -> [String] {
        var buffer = [UInt8](repeating: 0, count: 16_384)
        var found: [String] = []
        while true {
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EPIPE || errno == EINTR { continue }  // EPIPE: records overwritten before they were read
                break  // EAGAIN: no more records
            }
            guard count > 0 else { break }
            // One record a read: "priority,sequence,microseconds,flags;message\n".
            let record = String(decoding: buffer[0..<count], as: UTF8.self)
            guard let semicolon = record.firstIndex(of: ";") else { continue }
            let message = record[record.index(after: semicolon)...]
            guard message.hasPrefix("oom-kill:") else { continue }
            for field in message.split(separator: ",") where field.hasPrefix("task_memcg=") {
                let memcg = field.dropFirst("task_memcg=".count)
                if memcg == path {
                    found.append(".")
                } else if memcg.hasPrefix(path + "/") {
                    found.append(String(memcg.dropFirst(path.count + 1)))
                }
            }
        }
        return found
    }
}

extension Duration {
    fileprivate var inSeconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}

extension AgentBenchmark.Run {
    /// Takes the figures from a trial's outcome.
    mutating func read(_ outcome: SharedParentTrial.Outcome) {
        func integer(_ value: Any?) -> Int64 { (value as? NSNumber)?.int64Value ?? 0 }
        services = outcome.services.count
        survivors = outcome.services.filter(\.survived).count
        servicesKilled = outcome.services.filter { $0.status == 137 }.count
        episodes = outcome.episodes.map { episode in episode.duration.map { $0.inSeconds * 1000 } }
        parentPeakBytes = outcome.parentPeakBytes
        releasedBytes = outcome.releasedBytes
        releases = outcome.services.reduce(0) { $0 + $1.all("release").count }
        crossings = outcome.agent("crossing").count
        relievedMilliseconds = outcome.agent("relieved").compactMap { ($0["milliseconds"] as? NSNumber)?.doubleValue }
        let asked = outcome.agent("ask")
        asks = asked.count
        unanswered = outcome.agent("unanswered").count
        measuredFreedBytes = asked.reduce(0) { $0 + integer($1["measuredFreedBytes"]) }
        reportedFreedBytes = asked.reduce(0) { $0 + integer($1["reportedFreedBytes"]) }
    }
}

extension AgentBenchmark {
    struct Result {
        var benchmark: AgentBenchmark
        var runs: [Run]
        /// Trials not started because the budget was spent.
        var skipped: Int
        var seconds: Double
        /// How soon the agent reports a crossing, with a clean search path and one under attack.
        var detection: [AgentDetection.Result] = []

        func runs(_ workload: Int, _ coordination: SharedParentTrial.Coordination) -> [Run] {
            runs.filter { $0.workload == workload && $0.coordination == coordination && $0.failure == nil }
        }
    }
}

/// The median of `values` (the mean of the middle two for an even count), or `nil` for none.
private func median(_ values: [Double]) -> Double? {
    guard !values.isEmpty else { return nil }
    let sorted = values.sorted(), middle = sorted.count / 2
    return sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
}

private func mebibytes(_ bytes: Double) -> String { fixed(bytes / 1_048_576, 1) }

extension AgentBenchmark.Result {
    private func name(_ coordination: SharedParentTrial.Coordination) -> String { coordination.rawValue }

    /// One row of the main table.
    private func row(_ workload: Int, _ coordination: SharedParentTrial.Coordination) -> [String] {
        let runs = runs(workload, coordination)
        let label = benchmark.workloads[workload].name
        guard !runs.isEmpty else { return [label, name(coordination), "0"] + Array(repeating: "-", count: 9) }
        let episodes = runs.flatMap(\.finishedEpisodes), open = runs.reduce(0) { $0 + $1.openEpisodes }
        let kills = runs.compactMap(\.oomKills)
        let isAgent = coordination == .agent
        let crossings = runs.reduce(0) { $0 + $1.crossings }, asks = runs.reduce(0) { $0 + $1.asks }
        let peak = runs.map { Double($0.parentPeakBytes) / Double(max(1, $0.limitBytes)) * 100 }.max() ?? 0
        return [
            label, name(coordination), String(runs.count),
            "\(runs.reduce(0) { $0 + $1.survivors })/\(runs.reduce(0) { $0 + $1.services })",
            kills.count == runs.count ? String(kills.reduce(0, +)) : "?",
            "\(episodes.count + open)" + (open > 0 ? " (\(open) open)" : ""),
            median(episodes).map { fixed($0, 0) } ?? "-",
            episodes.max().map { fixed($0, 0) } ?? "-",
            median(runs.map { Double($0.releasedBytes) }).map(mebibytes) ?? "-",
            isAgent ? median(runs.map { Double($0.measuredFreedBytes) }).map(mebibytes) ?? "-" : "-",
            isAgent ? (crossings == 0 ? "-" : fixed(Double(asks) / Double(crossings), 2)) : "-",
            fixed(peak, 1),
        ]
    }

    var report: String {
        let benchmark = self.benchmark
        var rows = [["workload", "coordination", "runs", "survivors", "OOM kills", "episodes", "relief p50 ms", "relief max ms",
                     "released MiB/run", "agent measured MiB/run", "asks/episode", "peak % of limit"]]
        for workload in benchmark.workloads.indices {
            for coordination in AgentBenchmark.coordinations { rows.append(row(workload, coordination)) }
        }
        var perRun = [["workload", "coordination", "#", "survivors", "OOM-killed", "episodes ms", "released MiB", "releases",
                       "agent: crossings", "asks", "measured MiB", "reported MiB", "relieved ms", "s"]]
        for run in runs {
            let episodes = run.episodes.map { $0.map { fixed($0, 0) } ?? "open" }.joined(separator: ",")
            let isAgent = run.coordination == .agent
            perRun.append([
                benchmark.workloads[run.workload].name, run.coordination.rawValue, String(run.repeatIndex + 1),
                run.failure == nil ? "\(run.survivors)/\(run.services)" : "failed",
                run.oomVictims.map { $0.isEmpty ? "-" : $0.joined(separator: ",") } ?? "?", episodes.isEmpty ? "-" : episodes,
                mebibytes(Double(run.releasedBytes)), String(run.releases),
                isAgent ? String(run.crossings) : "-", isAgent ? String(run.asks) + (run.unanswered > 0 ? " (\(run.unanswered) unanswered)" : "") : "-",
                isAgent ? mebibytes(Double(run.measuredFreedBytes)) : "-", isAgent ? mebibytes(Double(run.reportedFreedBytes)) : "-",
                isAgent ? (run.relievedMilliseconds.isEmpty ? "-" : run.relievedMilliseconds.map { fixed($0, 0) }.joined(separator: ",")) : "-",
                fixed(run.seconds, 1),
            ])
        }
        let failures = runs.filter { $0.failure != nil }.map {
            "  \(benchmark.workloads[$0.workload].name), \($0.coordination.rawValue) #\($0.repeatIndex + 1): \($0.failure ?? "")"
        }
        func describe(_ services: [SharedParentTrial.Service]) -> String {
            services.map { "\($0.name) \(fixed($0.rateMiB, 0)) MiB/s to \(fixed($0.totalMiB, 0)) MiB" }.joined(separator: ", ")
        }
        let services = describe(AgentBenchmark.Workload.threeServices)
        let fast = describe(AgentBenchmark.Workload.fastServices)
        let bound = Int(AgentBenchmark.trialBound.inSeconds)
        return """
        agent: memwarn services sharing a limited parent cgroup (cgroup v1): the node agent, each service on its own, and nobody answering the parent
        services: memwarn-growth-probe (default policy, one DiscardableCache of 1 MiB entries, a control endpoint), each in a child cgroup of its own
        with no limit: \(services); inserts start after 1 s, each stays up 2 s after its last
        workloads: the three under a 256 MiB parent; the three and a sibling that does not link memwarn (memwarn-hog, 60 MiB in 10 steps) under 320 MiB;
        and three fast ones (\(fast)) under 384 MiB with two busy loops beside them (sh -c 'while :; do :; done') on the CPU
        coordinations: agent = memwarn agent --cgroup <parent> (the services lease it the parent; it asks them to release, largest first by the kernel's count);
        alone = each service's own monitor sees the parent's limit and releases on its own (the default policy, no agent);
        own-limit-only = each sees only its own limit (ancestor_limits = ignore): nobody answers the parent, the kernel does
        \(benchmark.repeats) run\(benchmark.repeats == 1 ? "" : "s") of each, taking turns (agent, alone, own-limit-only, agent, ...); each trial in a fresh parent, bounded at \(bound) s

        \(table(rows))

        columns:
          survivors         services that inserted their whole total and exited 0, of those started (all runs)
          OOM kills         processes under the parent the kernel OOM-killed, by its log (an oom-kill record each): services and sibling, all runs
          episodes          the parent's pressure episodes, read from outside every service every 2 ms: from at or above 80 % of its limit to
                            the first reading under 70 %, all runs ("open": not over when the services had ended)
          relief p50/max    how long those episodes lasted, median and max over the finished ones, in ms (the outside reader's clock)
          released MiB/run  what the services' releases freed, by their own release reports (freed of each release line), added per run: median over runs
          agent measured    what the agent's asks freed by the kernel's count (each asked service's cgroup usage before the ask minus after, signed), added per run: median over runs
          asks/episode      the agent's asks over its own crossings (an episode as the agent saw it), all runs
          peak % of limit   the highest parent usage the outside reader saw, as a share of the limit: the highest run

        run by run (OOM-killed: the victims' cgroups, from the kernel's log; episodes ms: each episode's length by the outside reader;
        the agent's crossings, asks, what the asks freed measured by the kernel and reported by the services, and its own relief times from its own readings):
        \(table(perRun))

        detection: how soon the agent reports a crossing of its parent's warning mark (a memwarn-hog steps a 256 MiB parent to 86 %, \(AgentDetection().crossings) times;
        from the hog's acknowledgement to the agent's crossing line, 0 when the line came first), with a clean search path and with 100 junk sockets
        (50 whose backlog is full, said unreachable at once; 50 that accept and never answer, held by this process outside the parent, left alone
        once their peer is read) and four hostile endpoints under the parent (hang on release, lie about size, a report whose sum overflows, never answer):
        \(table([AgentDetection.Result.header] + detection.map(\.row)))

        the whole run: \(fixed(seconds, 1)) s (no trial starts after \(fixed(benchmark.budgetSeconds, 0)) s; each is bounded at \(bound) s)
        """ + (skipped > 0 ? "\n\(skipped) trials not run: the budget (--budget) was spent" : "")
            + (failures.isEmpty ? "" : "\n\ntrials that failed (not in the table above):\n" + failures.joined(separator: "\n"))
    }

    var json: JSON {
        func doubles(_ values: [Double], _ digits: Int) -> JSON { .array(values.map { .double($0, digits: digits) }) }
        return .object([
            ("benchmark", .string("agent")),
            ("repeat", .number(benchmark.repeats)),
            ("budget_s", .double(benchmark.budgetSeconds, digits: 1)),
            ("trial_bound_s", .double(AgentBenchmark.trialBound.inSeconds, digits: 1)),
            ("seconds", .double(seconds, digits: 3)),
            ("skipped", .number(skipped)),
            ("workloads", .array(benchmark.workloads.map { workload in
                .object([
                    ("name", .string(workload.name)), ("limit_mib", .number(workload.limitMiB)),
                    ("services", .array(workload.services.map {
                        .object([("name", .string($0.name)), ("rate_mib_s", .double($0.rateMiB, digits: 1)), ("total_mib", .double($0.totalMiB, digits: 1))])
                    })),
                    ("sibling_mib", workload.sibling.map { .number($0.holdMiB) } ?? .raw("null")), ("cpu_hogs", .number(workload.cpuHogs)),
                ])
            })),
            ("runs", .array(runs.map { run in
                var members: [(String, JSON)] = [
                    ("workload", .string(benchmark.workloads[run.workload].name)), ("coordination", .string(run.coordination.rawValue)),
                    ("repeat", .number(run.repeatIndex + 1)), ("seconds", .double(run.seconds, digits: 3)),
                ]
                if let failure = run.failure {
                    members.append(("failure", .string(failure)))
                    return .object(members)
                }
                members += [
                    ("services", .number(run.services)), ("survivors", .number(run.survivors)), ("services_exit_137", .number(run.servicesKilled)),
                    ("oom_victims", run.oomVictims.map { .array($0.map { .string($0) }) } ?? .raw("null")),
                    ("episodes_ms", .array(run.episodes.map { $0.map { .double($0, digits: 1) } ?? .raw("null") })),
                    ("parent_peak_bytes", .number(run.parentPeakBytes)), ("limit_bytes", .number(run.limitBytes)),
                    ("released_bytes", .number(run.releasedBytes)), ("releases", .number(run.releases)),
                ]
                if run.coordination == .agent {
                    members += [
                        ("agent_crossings", .number(run.crossings)), ("agent_asks", .number(run.asks)), ("agent_unanswered", .number(run.unanswered)),
                        ("agent_measured_freed_bytes", .int(run.measuredFreedBytes)), ("agent_reported_freed_bytes", .int(run.reportedFreedBytes)),
                        ("agent_relieved_ms", doubles(run.relievedMilliseconds, 1)),
                    ]
                }
                return .object(members)
            })),
            ("detection", .array(detection.map(\.json))),
        ])
    }
}

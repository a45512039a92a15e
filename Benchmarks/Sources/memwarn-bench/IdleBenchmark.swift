import Foundation
import Memwarn
import MemwarnTestKit
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// What watching costs while nothing happens, on each path and at several usages: idle test
/// cgroups of 64 MiB whose hogs hold about nothing, half the limit, and just under the warning mark
/// (2 % of the limit below it), one more just under the mark whose usage moves a little all the
/// time (its hog holds 64 KiB more, then less, every 50 ms: a live service at rest), one whose
/// usage churns across the 55 % threshold (2 MiB mapped and unmapped every 5 ms, as a service
/// that maps a buffer per request: the kernel reports a crossing at each of its checks), and one
/// of 1 GiB held at half. Each is watched, over the same
/// interval, by a ``PressureMonitor`` in this process (root: cgroup v1 events, guard bands below
/// the marks) and by `memwarn watch` run as nobody (adaptive sampling: the path of cgroup v2, hosts
/// without a limit, ordinary users). Beside them: a thread reading usage every 100 ms (the obvious
/// peer), and a thread that only sleeps 5 ms at a time — the platform's own price for a wake-up at
/// the sampling floor.
///
/// Costs are the monitor threads' time on a CPU (`/proc/PID/task/TID/schedstat`, the scheduler's
/// own account); wake-ups are their context switches, about one each (each sampled wake-up is one
/// read of usage).
struct IdleBenchmark {
    /// Where the hogs sit: the limit, the share of it held (`nil`: 2 % of it under the warning
    /// mark), and how the hog's usage moves.
    static let positions: [(name: String, limit: UInt64, fraction: Double?, motion: Motion)] = [
        ("64 MiB, hog empty", 64 << 20, 0, .still), ("64 MiB, half", 64 << 20, 0.5, .still),
        ("64 MiB, just under the warning mark", 64 << 20, nil, .still),
        ("64 MiB, just under the warning mark, moving", 64 << 20, nil, .moving),
        ("64 MiB, churning across the 55 % threshold", 64 << 20, 0.55, .churning),
        ("1 GiB, half", 1 << 30, 0.5, .still),
    ]
    /// How a hog's usage moves.
    enum Motion {
        /// It stays put.
        case still
        /// ``movingStep`` up and down every ``movingPeriod``, above where it sits.
        case moving
        /// ``churningStep`` up and down every ``churningPeriod``, half of it each side of where it sits.
        case churning
    }
    /// How much a moving hog's usage goes up and down, and how often.
    static let movingStep = 64 << 10
    static let movingPeriod = Duration.milliseconds(50)
    /// How much a churning hog's usage goes up and down, and how often: 512 pages, so that the
    /// kernel (which checks its thresholds every 128 page events a CPU) sees each crossing.
    static let churningStep = 2 << 20
    static let churningPeriod = Duration.milliseconds(5)
    /// The position whose monitor's sources the report lists.
    static let listedPosition = 2
    static let bareTimerThreadName = "memwarn-bare5ms"

    var seconds: Double
    var cli: String
    /// The policy's `inactive_page_cache` for every watcher: `true` counts it (the default).
    var countsInactivePageCache = true

    /// The policy every watcher runs with: the default, but for ``countsInactivePageCache``.
    var policy: PressurePolicy {
        var policy = PressurePolicy()
        policy.countsInactivePageCache = countsInactivePageCache
        return policy
    }

    struct Cost {
        var name: String
        var nanoseconds: UInt64
        var switches: UInt64
        var note: String
    }

    struct Result {
        var seconds: Double
        var costs: [Cost]
        var watchedSources: [[String]]
        var countsInactivePageCache: Bool
    }

    /// A thread measured: where its counters are read.
    private struct Measured {
        var name: String
        var pid: Int32
        var tid: Int32
        var note: String
    }

    func run() async throws -> Result {
        var cgroups: [TestCgroup] = []
        defer {
            for cgroup in cgroups {
                MemoryHog.terminateAll(in: cgroup)
                try? cgroup.remove()
            }
        }
        for position in Self.positions { cgroups.append(try TestCgroup(limit: position.limit)) }
        return try await measure(cgroups: cgroups)
    }

    private func measure(cgroups: [TestCgroup]) async throws -> Result {
        let policy = self.policy
        var hogs: [MemoryHog] = []
        var movers: [Task<Void, any Error>] = []
        defer {
            for mover in movers { mover.cancel() }
            for hog in hogs { hog.terminate() }
        }
        for (cgroup, position) in zip(cgroups, Self.positions) {
            let hog = try MemoryHog()
            hogs.append(hog)
            try cgroup.add(pid: hog.pid)
            let overhead = Int(try cgroup.usage())
            let target = position.fraction.map { Double(position.limit) * $0 } ?? Double(position.limit) * (policy.warningRatio - 0.02)
            switch position.motion {
            case .still:
                if target > 0 { try hog.hold(Int(target) - overhead) }
            case .moving:
                try hog.hold(Int(target) - overhead)
                movers.append(Self.move(hog, from: Int(target) - overhead, by: Self.movingStep, every: Self.movingPeriod))
            case .churning:
                // Half a step under the threshold, measured (the cgroup's usage, not the hog's alone).
                let held = try hog.hold(Int(target) - overhead - Self.churningStep / 2)
                let low = held.bytes + Int(target) - Int(try cgroup.usage()) - Self.churningStep / 2
                try hog.hold(low)
                movers.append(Self.move(hog, from: low, by: Self.churningStep, every: Self.churningPeriod))
            }
        }
        var measured: [Measured] = []
        var monitors: [PressureMonitor] = []
        var runs: [Task<Void, any Error>] = []
        var watches: [SampledWatch] = []
        defer {
            for run in runs { run.cancel() }
            for watch in watches { watch.stop() }
        }
        for (cgroup, position) in zip(cgroups, Self.positions) {
            let before = Set(ThreadCPU.threads(named: "memwarn-monitor"))
            let monitor = PressureMonitor(
                configuration: MonitorConfiguration(policy: policy, cgroupPath: cgroup.location.directory, environment: [:]), logger: quietLogger)
            guard let tid = ThreadCPU.threads(named: "memwarn-monitor").first(where: { !before.contains($0) }) else {
                throw BenchmarkError("no new memwarn-monitor thread")
            }
            monitors.append(monitor)
            runs.append(Task { try await monitor.run() })
            measured.append(Measured(name: "events (root), \(position.name)", pid: getpid(), tid: tid, note: ""))
            let watch = try SampledWatch(
                cli: cli, cgroupPath: cgroup.location.path, environment: countsInactivePageCache ? [:] : ["MEMWARN_INACTIVE_PAGE_CACHE": "ignore"])
            watches.append(watch)
            guard let childTid = ThreadCPU.threads(named: "memwarn-monitor", in: watch.pid).first else {
                throw BenchmarkError("memwarn watch (pid \(watch.pid)) has no memwarn-monitor thread")
            }
            measured.append(Measured(name: "adaptive sampling (nobody), \(position.name)", pid: watch.pid, tid: childTid, note: ""))
        }
        // The events path is in its steady state once the usage thresholds are registered.
        let deadline = ContinuousClock.now + .seconds(15)
        while monitors.contains(where: { $0.usageWatchName != "thresholds" }) {
            guard ContinuousClock.now < deadline else { throw BenchmarkError("usage thresholds not registered within 15 s") }
            try await Task.sleep(for: .milliseconds(10))
        }
        let poller = PollingReader(location: cgroups[0].location, threshold: UInt64(Double(Self.positions[0].limit) * policy.warningRatio))
        poller.start()
        defer { poller.stop() }
        let bare = BareTimer(interval: .milliseconds(5))
        bare.start()
        defer { bare.stop() }
        try await Task.sleep(for: .seconds(1))  // settled: start-up is not idling
        guard let pollerTid = ThreadCPU.thread(named: PollingReader.threadName), let bareTid = ThreadCPU.thread(named: Self.bareTimerThreadName) else {
            throw BenchmarkError("a peer thread is missing")
        }
        measured.append(Measured(name: "100 ms polling reader, \(Self.positions[0].name)", pid: getpid(), tid: pollerTid, note: "open, read, close the usage file"))
        measured.append(Measured(name: "bare 5 ms timer (sleeps only)", pid: getpid(), tid: bareTid, note: "the platform's price of the wake-ups"))

        func sample() throws -> [(UInt64, UInt64)] {
            try measured.map { thread in
                guard let time = ThreadCPU.scheduledNanoseconds(pid: thread.pid, tid: thread.tid),
                      let switches = ThreadCPU.contextSwitches(pid: thread.pid, tid: thread.tid) else {
                    throw BenchmarkError("\(thread.name): its thread ended early")
                }
                return (time, switches)
            }
        }
        let startWall = ChildProcess.monotonicNanoseconds()
        let before = try sample()
        try await Task.sleep(for: .nanoseconds(Int64(seconds * 1_000_000_000)))
        let after = try sample()
        let elapsed = Double(ChildProcess.monotonicNanoseconds() - startWall) / 1e9
        let costs = measured.indices.map { index in
            Cost(name: measured[index].name, nanoseconds: after[index].0 - before[index].0, switches: after[index].1 - before[index].1,
                 note: measured[index].note)
        }
        return Result(
            seconds: elapsed, costs: costs, watchedSources: monitors.map(\.sourcesWatched), countsInactivePageCache: countsInactivePageCache)
    }
}

extension IdleBenchmark {
    /// Has `hog` hold `step` more than `bytes`, then `bytes` again, every `period`, until
    /// cancelled: usage that never stays put, as a live service's.
    static func move(_ hog: MemoryHog, from bytes: Int, by step: Int, every period: Duration) -> Task<Void, any Error> {
        Task.detached {
            var up = true
            while !Task.isCancelled {
                try hog.hold(bytes + (up ? step : 0))
                up.toggle()
                try await Task.sleep(for: period)
            }
        }
    }
}

/// A thread that only sleeps `interval` at a time, forever, until stopped.
final class BareTimer: Sendable {
    private let interval: Duration
    private let stopping = Atomic<Bool>(false)

    init(interval: Duration) { self.interval = interval }

    func start() {
        let thread = Thread { [self] in
            nameCurrentThread(IdleBenchmark.bareTimerThreadName)
            let nanoseconds = interval.components.attoseconds / 1_000_000_000 + interval.components.seconds * 1_000_000_000
            var request = timespec(tv_sec: Int(nanoseconds / 1_000_000_000), tv_nsec: Int(nanoseconds % 1_000_000_000))
            while !stopping.load(ordering: .relaxed) {
                var remaining = timespec()
                nanosleep(&request, &remaining)
            }
        }
        thread.start()
    }

    func stop() { stopping.store(true, ordering: .relaxed) }
}

extension IdleBenchmark.Result {
    private func percent(_ nanoseconds: UInt64) -> Double { Double(nanoseconds) / 1e9 / seconds * 100 }

    var report: String {
        var rows = [["watcher, usage", "CPU s", "% of one core", "wake-ups/s", "µs a wake-up", "note"]]
        for cost in costs {
            let wakes = Double(cost.switches) / seconds
            rows.append([cost.name, fixed(Double(cost.nanoseconds) / 1e9, 4), fixed(percent(cost.nanoseconds), 4) + "%", fixed(wakes, 1),
                         cost.switches == 0 ? "-" : fixed(Double(cost.nanoseconds) / Double(cost.switches) / 1e3, 1), cost.note])
        }
        return """
        idle: \(fixed(seconds, 1)) s watching \(IdleBenchmark.positions.count) idle test cgroups (\(countsInactivePageCache ? "default policy" : "default policy but inactive_page_cache = ignore")), every watcher side by side
        CPU = the watcher's monitor thread's time on a CPU (/proc/PID/task/TID/schedstat); wake-ups = its context switches
        (one per wake-up; a sampled wake-up reads usage once)

        \(table(rows))

        the in-process monitor just under the warning mark listens to:
        \((watchedSources.count > IdleBenchmark.listedPosition ? watchedSources[IdleBenchmark.listedPosition] : []).map { "  " + $0 }.joined(separator: "\n"))
        """
    }

    var json: JSON {
        .object([
            ("benchmark", .string("idle")),
            ("seconds", .double(seconds, digits: 3)),
            ("inactive_page_cache", .string(countsInactivePageCache ? "count" : "ignore")),
            ("watchers", .array(costs.map { cost in
                .object([
                    ("name", .string(cost.name)),
                    ("cpu_seconds", .double(Double(cost.nanoseconds) / 1e9, digits: 9)),
                    ("cpu_percent_of_one_core", .double(percent(cost.nanoseconds), digits: 6)),
                    ("wakeups_per_second", .double(Double(cost.switches) / seconds, digits: 2)),
                ])
            })),
        ])
    }
}

import CgroupKit
import Memwarn
import MemwarnTestKit
import Synchronization

/// What watching costs while nothing happens: the CPU time of the monitor's thread
/// (`memwarn-monitor`) and of a 100 ms polling thread (`memwarn-poller`), both watching the
/// same idle cgroup over the same interval, each measured on its own per-thread CPU clock.
struct IdleBenchmark {
    static let limit: UInt64 = 64 << 20

    var seconds: Double

    struct ThreadCost {
        var name: String
        var tid: Int32
        var nanoseconds: UInt64
        var ticks: UInt64
        var switches: UInt64
        /// The thread's CPU time since it started, at the end (to show the clock reads it).
        var totalNanoseconds: UInt64
    }

    struct Result {
        var seconds: Double
        var monitor: ThreadCost
        var poller: ThreadCost
        var processNanoseconds: UInt64
        var monitorEvents: Int
        var pollerReads: Int
        var watchedSources: [String]
    }

    func run() async throws -> Result {
        try await withTestCgroup(limit: Self.limit) { cgroup in
            let configuration = MonitorConfiguration(cgroupPath: cgroup.location.directory)  // the default policy
            let monitor = PressureMonitor(configuration: configuration, logger: quietLogger)
            let events = Atomic<Int>(0)
            var iterator = monitor.events().makeAsyncIterator()
            let poller = PollingReader(location: cgroup.location, threshold: UInt64(Double(Self.limit) * configuration.policy.warningRatio))
            let running = Task { try await monitor.run() }
            do {
                // Start-up (discovery, registering the sources, the first reading) is not idling.
                _ = try await next(&iterator, waitingFor: "initial monitor event")
                monitor.addObserver { _ in events.add(1, ordering: .relaxed) }
                var observations = poller.observations.makeAsyncIterator()
                poller.start()
                _ = try await next(&observations, waitingFor: "first poll")
                guard let monitorTid = ThreadCPU.thread(named: "memwarn-monitor") else { throw BenchmarkError("no thread named memwarn-monitor") }
                guard let pollerTid = ThreadCPU.thread(named: PollingReader.threadName) else { throw BenchmarkError("no thread named \(PollingReader.threadName)") }

                let readsBefore = poller.reads
                let before = try Self.measure(monitorTid, pollerTid)
                try await Task.sleep(for: .nanoseconds(Int64(seconds * 1_000_000_000)))
                let after = try Self.measure(monitorTid, pollerTid)
                let reads = poller.reads - readsBefore
                let watched = monitor.watchedSources

                poller.stop()
                running.cancel()
                try await running.value
                let elapsed = Double(after.wall - before.wall) / 1_000_000_000
                return Result(
                    seconds: elapsed,
                    monitor: ThreadCost(name: "memwarn-monitor", tid: monitorTid, nanoseconds: after.monitor - before.monitor, ticks: after.monitorTicks - before.monitorTicks,
                                         switches: after.monitorSwitches - before.monitorSwitches, totalNanoseconds: after.monitor),
                    poller: ThreadCost(name: PollingReader.threadName, tid: pollerTid, nanoseconds: after.poller - before.poller, ticks: after.pollerTicks - before.pollerTicks,
                                        switches: after.pollerSwitches - before.pollerSwitches, totalNanoseconds: after.poller),
                    processNanoseconds: after.process - before.process,
                    monitorEvents: events.load(ordering: .relaxed), pollerReads: reads, watchedSources: watched)
            } catch {
                poller.stop()
                running.cancel()
                _ = await running.result
                throw error
            }
        }
    }

    private struct Sample {
        var wall: UInt64
        var monitor: UInt64
        var poller: UInt64
        var monitorTicks: UInt64
        var pollerTicks: UInt64
        var monitorSwitches: UInt64
        var pollerSwitches: UInt64
        var process: UInt64
    }

    private static func measure(_ monitorTid: Int32, _ pollerTid: Int32) throws -> Sample {
        guard let monitor = ThreadCPU.nanoseconds(tid: monitorTid), let poller = ThreadCPU.nanoseconds(tid: pollerTid),
              let monitorTicks = ThreadCPU.statTicks(tid: monitorTid), let pollerTicks = ThreadCPU.statTicks(tid: pollerTid),
              let monitorSwitches = ThreadCPU.contextSwitches(tid: monitorTid), let pollerSwitches = ThreadCPU.contextSwitches(tid: pollerTid) else {
            throw BenchmarkError("a measured thread ended early")
        }
        return Sample(wall: monotonicNanoseconds(), monitor: monitor, poller: poller, monitorTicks: monitorTicks, pollerTicks: pollerTicks,
                      monitorSwitches: monitorSwitches, pollerSwitches: pollerSwitches,
                      process: ThreadCPU.processNanoseconds())
    }
}

extension IdleBenchmark.Result {
    private func seconds(_ nanoseconds: UInt64) -> Double { Double(nanoseconds) / 1_000_000_000 }
    private func percent(_ nanoseconds: UInt64) -> Double { seconds(nanoseconds) / self.seconds * 100 }
    private func tickSeconds(_ ticks: UInt64) -> Double { Double(ticks) / Double(ThreadCPU.ticksPerSecond) }

    var report: String {
        func row(_ label: String, _ cost: IdleBenchmark.ThreadCost, _ activity: String) -> [String] {
            [label, "\(cost.name) (\(cost.tid))", fixed(seconds(cost.nanoseconds), 6), fixed(percent(cost.nanoseconds), 4) + "%",
             fixed(tickSeconds(cost.ticks), 2), String(cost.switches), activity]
        }
        return """
        idle: \(fixed(seconds, 1)) s watching an idle \(IdleBenchmark.limit >> 20) MiB test cgroup (default policy); both threads ran side by side
        CPU = per-thread CPU clock (user + system, ns resolution); /proc stat = utime + stime of /proc/self/task/<tid>/stat (1/\(ThreadCPU.ticksPerSecond) s ticks);
        ctx switches = voluntary + involuntary context switches in the interval (about one a wake-up)

        \(table([
            ["reader", "thread (tid)", "CPU s", "% of one core", "/proc stat s", "ctx switches", "activity"],
            row("PressureMonitor", monitor, "\(monitorEvents) level events"),
            row("100 ms polling reader", poller, "\(pollerReads) reads"),
            ["whole process (getrusage)", "all", fixed(seconds(processNanoseconds), 6), fixed(percent(processNanoseconds), 4) + "%", "", "", ""],
        ]))

        CPU since each thread started: monitor \(fixed(seconds(monitor.totalNanoseconds), 6)) s, poller \(fixed(seconds(poller.totalNanoseconds), 6)) s
        monitor sources:
        \(watchedSources.map { "  " + $0 }.joined(separator: "\n"))
        """
    }

    var json: JSON {
        func cost(_ cost: IdleBenchmark.ThreadCost, extra: [(String, JSON)]) -> JSON {
            .object([
                ("thread", .string(cost.name)),
                ("tid", .number(Int(cost.tid))),
                ("cpu_seconds", .double(seconds(cost.nanoseconds), digits: 9)),
                ("cpu_percent_of_one_core", .double(percent(cost.nanoseconds), digits: 6)),
                ("proc_stat_seconds", .double(tickSeconds(cost.ticks), digits: 2)),
                ("context_switches", .number(cost.switches)),
                ("cpu_seconds_since_thread_start", .double(seconds(cost.totalNanoseconds), digits: 9)),
            ] + extra)
        }
        return .object([
            ("benchmark", .string("idle")),
            ("seconds", .double(seconds, digits: 3)),
            ("limit_bytes", .number(IdleBenchmark.limit)),
            ("monitor", cost(monitor, extra: [
                ("level_events", .number(monitorEvents)),
                ("watched_sources", .array(watchedSources.map { .string($0) })),
            ])),
            ("poller", cost(poller, extra: [("reads", .number(pollerReads)), ("poll_interval_ms", .number(100))])),
            ("process_cpu_seconds", .double(seconds(processNanoseconds), digits: 6)),
            ("process_cpu_percent_of_one_core", .double(percent(processNanoseconds), digits: 6)),
        ])
    }
}

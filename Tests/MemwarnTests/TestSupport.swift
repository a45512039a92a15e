import Logging
import Memwarn
import MemwarnTestKit

@testable import MemwarnMonitor

#if canImport(Glibc)
import Glibc
#endif

let testLogger = Logger(label: "memwarn.tests")

/// Runs a monitor in a child task for the duration of `body`, then cancels it and returns
/// what `run()` ended with.
func withRunningMonitor<T: Sendable>(_ monitor: PressureMonitor, _ body: (inout AsyncStream<LevelEvent>.Iterator) async throws -> T) async throws -> T {
    var iterator = monitor.events().makeAsyncIterator()
    let running = Task { try await monitor.run() }
    do {
        let result = try await body(&iterator)
        running.cancel()
        try await running.value
        return result
    } catch {
        running.cancel()
        _ = await running.result
        throw error
    }
}

/// Waits, looking every 5 ms, until `condition` holds.
func waitUntil(within limit: Duration = .seconds(5), _ what: String = "the condition", _ condition: () throws -> Bool) async throws {
    let deadline = ContinuousClock.now + limit
    while try !condition() {
        guard ContinuousClock.now < deadline else { throw ChildProcessError("\(what) within \(limit)") }
        try await Task.sleep(for: .milliseconds(5))
    }
}

/// cgroup v1 as root: waits until the monitor's usage thresholds are registered. They follow
/// arming by about 0.3 s (the kernel takes an RCU grace period for each); usage is sampled
/// meanwhile, so a test about the kernel's events waits for them first.
func waitForUsageThresholds(_ monitor: PressureMonitor, within limit: Duration = .seconds(10)) async throws {
    try await waitUntil(within: limit, "the usage thresholds registered (\(monitor.watchedSources))") { monitor.usageWatch == .thresholds }
}

/// The usage thresholds a root monitor on cgroup v1 registers for `limit` on the default policy:
/// the 10 of the marks and every 5 % from half the limit up, and a guard below each of the 3
/// marks, as bytes (a guard that falls on a 5 % threshold — hosts with 3 CPUs or more, at 64 MiB —
/// is that threshold, registered once).
func expectedUsageThresholds(limit: UInt64) -> (thresholds: Set<UInt64>, guards: Set<UInt64>) {
    let thresholds = Set([0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95].map { UInt64(Double(limit) * $0) })
    let band = SamplingRule.guardBand(capacity: limit, processors: max(1, sysconf(Int32(_SC_NPROCESSORS_ONLN))))
    let guards = Set([0.7, 0.8, 0.9].map { UInt64(Double(limit) * $0) - band })
    return (thresholds, guards)
}

package import Logging
package import MemwarnMonitor
import MemwarnTestKit

/// The logger every test suite logs to.
package let testLogger = Logger(label: "memwarn.tests")

/// Runs a monitor in a child task for the duration of `body`, then cancels it and returns
/// what `run()` ended with.
package func withRunningMonitor<T: Sendable>(_ monitor: PressureMonitor, _ body: (inout AsyncStream<LevelEvent>.Iterator) async throws -> T) async throws -> T {
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

/// cgroup v1 as root: waits until the monitor's usage thresholds are registered. They follow
/// arming by about 0.3 s (the kernel takes an RCU grace period for each); usage is sampled
/// meanwhile, so a test about the kernel's events waits for them first.
package func waitForUsageThresholds(_ monitor: PressureMonitor, within limit: Duration = .seconds(10)) async throws {
    try await waitUntil(within: limit, "the usage thresholds registered (\(monitor.watchedSources))") { monitor.usageWatch == .thresholds }
}

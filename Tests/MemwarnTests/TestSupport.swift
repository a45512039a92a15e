import Logging
import MemwarnTestKit
@testable import Memwarn

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

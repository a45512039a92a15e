import Logging
@testable import Memwarn

/// Waits for the next element, failing (not hanging) after `limit`.
func next<Element: Sendable>(_ iterator: inout AsyncStream<Element>.Iterator, within limit: Duration = .seconds(15)) async throws -> Element {
    let box = IteratorBox(iterator)
    defer { iterator = box.iterator }
    return try await withThrowingTaskGroup(of: Element?.self) { group in
        group.addTask { await box.next() }
        group.addTask {
            try await Task.sleep(for: limit)
            throw TimedOut(limit: limit)
        }
        defer { group.cancelAll() }
        guard let element = try await group.next() ?? nil else { throw StreamEnded() }
        return element
    }
}

struct TimedOut: Error, CustomStringConvertible {
    var limit: Duration
    var description: String { "no event within \(limit)" }
}

struct StreamEnded: Error {}

/// Lets a task group's child iterate a stream that the test owns.
final class IteratorBox<Element: Sendable>: @unchecked Sendable {
    // @unchecked: used by one child task at a time; the test awaits it before touching it again.
    var iterator: AsyncStream<Element>.Iterator
    init(_ iterator: AsyncStream<Element>.Iterator) { self.iterator = iterator }
    func next() async -> Element? { await iterator.next() }
}

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

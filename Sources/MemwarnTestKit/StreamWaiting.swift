/// Waits for the next element of a stream, failing (not hanging) after `limit`: for tests and
/// benchmarks that wait on events rather than sleep.
///
/// - Parameter what: what is awaited, for the error message.
/// - Throws: ``StreamWaitFailure`` when nothing came within `limit` or the stream ended.
public func next<Element: Sendable>(
    _ iterator: inout AsyncStream<Element>.Iterator, within limit: Duration = .seconds(15),
    waitingFor what: String = "event"
) async throws -> Element {
    let box = IteratorBox(iterator)
    defer { iterator = box.iterator }
    return try await withThrowingTaskGroup(of: Element?.self) { group in
        group.addTask { await box.next() }
        group.addTask {
            try await Task.sleep(for: limit)
            throw StreamWaitFailure(description: "no \(what) within \(limit)")
        }
        defer { group.cancelAll() }
        guard let element = try await group.next() ?? nil else { throw StreamWaitFailure(description: "the stream ended before a \(what)") }
        return element
    }
}

/// Why ``next(_:within:waitingFor:)`` gave up.
public struct StreamWaitFailure: Error, CustomStringConvertible {
    public var description: String
}

/// Lets a task group's child iterate a stream its caller owns.
private final class IteratorBox<Element: Sendable>: @unchecked Sendable {
    // @unchecked: used by one child task at a time; the caller awaits it before touching it again.
    var iterator: AsyncStream<Element>.Iterator
    init(_ iterator: AsyncStream<Element>.Iterator) { self.iterator = iterator }
    func next() async -> Element? { await iterator.next() }
}

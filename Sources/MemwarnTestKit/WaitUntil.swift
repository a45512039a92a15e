/// Waits, looking every `interval` (5 ms), until `condition` holds: the tests' one wait for what raises no
/// event (a file's content, a process in `/proc`, a count another thread moves). What does raise
/// one is awaited instead: ``AsyncCondition``, or `next(_:within:waitingFor:)` for a stream.
///
/// - Parameters:
///   - limit: how long at most: a bound against a hang, not a measurement.
///   - what: what is awaited, for the error message.
///   - interval: how often to look; longer for a condition that costs (a scan of `/proc`).
///   - condition: looked at once now, then every `interval`; an error it throws ends the wait.
/// - Throws: ``ChildProcessError`` naming `what` when `limit` passed first, or what `condition` threw.
package func waitUntil(
    within limit: Duration = .seconds(5), every interval: Duration = .milliseconds(5), _ what: String = "the condition",
    _ condition: () throws -> Bool
) async throws {
    let deadline = ContinuousClock.now + limit
    while try !condition() {
        guard ContinuousClock.now < deadline else { throw ChildProcessError("\(what) within \(limit)") }
        try await Task.sleep(for: interval)
    }
}

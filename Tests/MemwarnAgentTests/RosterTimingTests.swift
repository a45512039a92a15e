import Testing

@testable import MemwarnAgent

/// A service that answers its status slowly (three pods starting together under emulation missed
/// the 250 ms bound three times running, and the agent's first round left the largest out) is
/// given longer at each try; a socket that never answers costs at most 2 s of the roster's thread.
struct RosterTimingTests {
    @Test func aSearchAskingSocketsThatFailedAgainWaitsLongerEachTimeUpToTwoSeconds() {
        let bounds = (0...6).map { ServiceRoster.searchTimeout(afterFailures: $0) }
        #expect(bounds == [.milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2), .seconds(2), .seconds(2), .seconds(2)])
        // Retried 250 ms after the first failure, then 500 ms, 1 s…: with the longer bounds, a
        // service answering in 600 ms is found at its second retry, about 1 s after its first miss.
        #expect(ServiceRoster.retryDelay(afterFailures: 1) == .milliseconds(250))
    }
}

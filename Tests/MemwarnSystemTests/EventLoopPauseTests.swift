import MemwarnSystem
import Testing

/// ``EventLoop/pause(_:for:thenWatch:resumeFailed:)`` on a real eventfd, driven on a manual clock:
/// nothing is delivered during the pause, what was signalled meanwhile is delivered once it ends,
/// a registration unwatched during the pause stays unwatched, and a pause of zero pauses nothing.
@Suite struct EventLoopPauseTests {
    /// A driven loop on a manual clock watching an eventfd whose handler counts its firings and
    /// empties it.
    final class WatchedCounter {
        let clock = ManualClock()
        let loop: EventLoop
        let counter: FileDescriptor
        var fired = 0
        var registration: EventLoop.Registration!
        var failures: [SystemError] = []

        init() throws {
            loop = try EventLoop(clock: clock.clock)
            counter = try FileDescriptor.eventCounter()
            try loop.drive()
            registration = try loop.watch(counter, for: .readable) { [unowned self] _ in
                fired += 1
                _ = try? counter.readCounter()
            }
        }

        @discardableResult
        func pause(for quiet: Duration) throws -> Bool { try loop.pause(registration, for: quiet) { [unowned self] in failures.append($0) } }
        func signal() throws { try counter.signalCounter() }
        func advance(by duration: Duration) throws {
            clock.advance(by: duration)
            try loop.drive()
        }
    }

    @Test func aSignalDuringThePauseIsDeliveredWhenItEnds() throws {
        let watched = try WatchedCounter()
        try watched.signal()
        try watched.loop.drive()
        #expect(watched.fired == 1)

        try watched.pause(for: .milliseconds(100))
        try watched.signal()
        try watched.signal()
        try watched.loop.drive()
        #expect(watched.fired == 1, "delivered during the pause")
        try watched.advance(by: .milliseconds(99))
        #expect(watched.fired == 1, "delivered 1 ms before the pause ends")
        try watched.advance(by: .milliseconds(1))
        #expect(watched.fired == 2, "the two signals of the pause, delivered once as it ends")
        try watched.signal()
        try watched.loop.drive()
        #expect(watched.fired == 3, "watched again after the pause")
        #expect(watched.failures.isEmpty)
        watched.loop.unwatch(watched.registration)
    }

    @Test func aRegistrationUnwatchedDuringThePauseStaysUnwatched() throws {
        let watched = try WatchedCounter()
        try watched.pause(for: .milliseconds(100))
        watched.loop.unwatch(watched.registration)
        #expect(!watched.loop.isWatching(watched.registration))
        try watched.signal()
        try watched.advance(by: .milliseconds(100))
        #expect(watched.fired == 0)
        #expect(watched.failures.isEmpty, "a pause that ends after an unwatch is no failure: \(watched.failures)")
        #expect(!watched.loop.isWatching(watched.registration))
    }

    @Test func aPauseOfZeroLeavesTheDescriptorWatched() throws {
        let watched = try WatchedCounter()
        // Paused for zero, a descriptor that keeps firing would be paused and watched again at
        // every turn: the loop would never rest.
        #expect(try watched.pause(for: .zero) == false, "a pause of zero paused it")
        #expect(try watched.pause(for: .nanoseconds(-1)) == false, "a negative pause paused it")
        try watched.signal()
        try watched.loop.drive()
        #expect(watched.fired == 1)
        #expect(watched.failures.isEmpty)
        watched.loop.unwatch(watched.registration)
    }
}

import MemwarnSystem
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The epoll loop on real eventfds, on a thread of its own: handlers, deadlines, hand-over from
/// other threads, and the registration ids that keep a stale event from reaching a new watcher.
@Suite struct EventLoopTests {
    /// Runs `setup` on a new loop's thread, then the loop until a handler stops it; returns what
    /// the handlers recorded.
    static func runLoop(timeout: Duration = .seconds(10), _ setup: @escaping @Sendable (EventLoop, Recorder) throws -> Void) throws -> [String] {
        let loop = try EventLoop()
        let recorder = Recorder()
        let ended = ConditionLock<Result<Void, any Error>?>(nil)
        try SystemThread.start(name: "test-loop") {
            let outcome = Result { try loop.run { try setup(loop, recorder) } }
            ended.withLock { $0 = outcome }
        }
        let outcome = ended.wait(timeout: timeout) { $0 }
        try #require(outcome != nil, "the loop did not stop within \(timeout)")
        try outcome!.get()
        return recorder.events
    }

    final class Recorder: Sendable {
        private let log = Locked<[String]>([])
        func record(_ event: String) { log.withLock { $0.append(event) } }
        var events: [String] { log.withLock { $0 } }
    }

    /// A descriptor kept open as long as the test holds this.
    final class Kept: Sendable {
        let descriptor: FileDescriptor
        init(_ descriptor: consuming FileDescriptor) { self.descriptor = descriptor }
    }

    /// Descriptors kept open by the test for the loop's lifetime.
    final class Held: Sendable {
        private let kept = Locked<[Kept]>([])
        func keep(_ descriptor: consuming FileDescriptor) -> Kept {
            let kept = Kept(descriptor)
            self.kept.withLock { $0.append(kept) }
            return kept
        }
        func close(_ number: Int32) { kept.withLock { $0.removeAll { $0.descriptor.rawValue == number } } }
        func kept(_ number: Int32) -> Kept? { kept.withLock { $0.first { $0.descriptor.rawValue == number } } }
    }

    @Test func aReadyEventfdReachesItsHandlerWithTheEventsThatFired() throws {
        let held = Held()
        let events = try Self.runLoop { loop, recorder in
            let counter = held.keep(try FileDescriptor.eventCounter())
            try counter.descriptor.signalCounter()
            try loop.watch(counter.descriptor, for: .readable) { fired in
                recorder.record("fired readable=\(fired.contains(.readable))")
                loop.stop()
            }
        }
        #expect(events == ["fired readable=true"])
    }

    @Test func anEventQueuedForAnUnwatchedDescriptorNeverReachesTheWatcherOfItsReusedNumber() throws {
        let held = Held()
        let events = try Self.runLoop { loop, recorder in
            // Two ready descriptors: whichever handler runs first unwatches the other, puts a new
            // eventfd on its number (dup2 replaces what the number names in one step: waiting for
            // the kernel to hand the freed number out again races the other suites' descriptors)
            // and watches it. The event already fetched for the old registration must be dropped,
            // not delivered to the new handler.
            let first = held.keep(try FileDescriptor.eventCounter())
            let second = held.keep(try FileDescriptor.eventCounter())
            try first.descriptor.signalCounter()
            try second.descriptor.signalCounter()
            let numbers = (first.descriptor.rawValue, second.descriptor.rawValue)
            let registrations = Locked<[Int32: EventLoop.Registration]>([:])
            for kept in [first, second] {
                let descriptor = kept.descriptor.rawValue
                let registration = try loop.watch(kept.descriptor, for: .readable) { _ in
                    _ = try? kept.descriptor.readCounter()  // drained: it fires once
                    let other = descriptor == numbers.0 ? numbers.1 : numbers.0
                    recorder.record("handler of the first-run descriptor")
                    if let stale = registrations.withLock({ $0.removeValue(forKey: other) }) {
                        loop.unwatch(stale)
                        // `held` owns the number and closes it at the end; `fresh` closes its own.
                        guard let fresh = try? FileDescriptor.eventCounter(), let new = held.kept(other) else { return }
                        let replaced = dup2(fresh.rawValue, other) == other && fcntl(other, F_SETFD, FD_CLOEXEC) == 0
                        recorder.record(replaced ? "number reused" : "dup2 failed: errno \(errno)")
                        _ = try? loop.watch(new.descriptor, for: .readable) { _ in recorder.record("new watcher fired") }
                    }
                    loop.schedule(at: .now + .milliseconds(100)) { loop.stop() }
                }
                registrations.withLock { $0[descriptor] = registration }
            }
        }
        #expect(events.first == "handler of the first-run descriptor")
        #expect(events.contains("number reused"), "the test needs the number to be reused: \(events)")
        #expect(!events.contains("new watcher fired"), "the stale event went to the new watcher: \(events)")
        #expect(events.filter { $0 == "handler of the first-run descriptor" }.count == 1, "\(events)")
    }

    @Test func deadlinesRunInTheirOrderAndACancelledOneNever() throws {
        let events = try Self.runLoop { loop, recorder in
            let now = ContinuousClock.now
            loop.schedule(at: now + .milliseconds(60)) { recorder.record("60") }
            let cancelled = loop.schedule(at: now + .milliseconds(40)) { recorder.record("40") }
            loop.schedule(at: now + .milliseconds(20)) { recorder.record("20") }
            loop.schedule(at: now + .milliseconds(80)) { loop.stop() }
            loop.cancel(cancelled)
        }
        #expect(events == ["20", "60"])
    }

    @Test func workHandedOverFromAnotherThreadRunsOnTheLoopsThread() throws {
        let events = try Self.runLoop { loop, recorder in
            #expect(loop.isOnLoop)
            try SystemThread.start(name: "test-other") {
                #expect(!loop.isOnLoop)
                loop.execute {
                    recorder.record("ran on the loop: \(loop.isOnLoop)")
                    loop.stop()
                }
            }
        }
        #expect(events == ["ran on the loop: true"])
    }

    @Test func aFailingSetupEndsTheRunWithItsError() throws {
        struct SetupFailed: Error {}
        #expect(throws: SetupFailed.self) { _ = try Self.runLoop { _, _ in throw SetupFailed() } }
    }

    @Test func aDeadlineAnActionSchedulesInThePastWaitsForTheNextTurnAndCancellingWithinATurnHolds() throws {
        let events = try Self.runLoop { loop, recorder in
            let now = ContinuousClock.now
            var later: EventLoop.Deadline?
            loop.schedule(at: now + .milliseconds(10)) {
                recorder.record("first")
                loop.schedule(at: now) { recorder.record("scheduled in the past") }  // due, but the next turn's
                if let later { loop.cancel(later) }
            }
            later = loop.schedule(at: now + .milliseconds(10)) { recorder.record("cancelled by the first") }
            loop.schedule(at: now + .milliseconds(50)) { loop.stop() }
        }
        #expect(events == ["first", "scheduled in the past"])
    }

    @Test func workHandedOverAfterTheLoopEndedIsDroppedAndReleased() throws {
        final class Token: Sendable {}
        let loop = try EventLoop()
        let ended = ConditionLock(false)
        try SystemThread.start(name: "test-loop") {
            try? loop.run { loop.stop() }
            ended.withLock { $0 = true }
        }
        _ = ended.wait(timeout: .seconds(10)) { $0 ? true : nil }
        weak var released: Token?
        do {
            let token = Token()
            released = token
            loop.execute { withExtendedLifetime(token) {} }
        }
        #expect(released == nil, "the loop kept work it will never run")
    }
}

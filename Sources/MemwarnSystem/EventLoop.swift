import CLinuxCalls

#if canImport(Glibc)
import Glibc
#endif

/// One epoll loop on one thread: descriptors and deadlines, nothing else.
///
/// It sleeps in `epoll_wait` with no timeout unless a deadline is pending, so it uses no CPU
/// while nothing happens. Everything registered runs on the loop's thread, and every method but
/// ``execute(_:)`` and ``run(_:)`` must be called there (each checks it, in release builds too): other threads hand
/// work over with ``execute(_:)``, which wakes the loop through an eventfd.
///
/// Each watch gets a ``Registration`` whose number travels with the descriptor's events, so an
/// event still queued for a descriptor that was unwatched (and whose number the kernel may
/// since have given to another file) is dropped, never delivered to the new watcher.
///
/// Deadlines are instants of the loop's ``clock``, which what runs on the loop reads too
/// (``now``). A test gives it a ``ManualClock`` and turns it with ``drive()`` on its own thread:
/// what a deadline does is then tested synchronously, by moving the clock, not by waiting.
package final class EventLoop: @unchecked Sendable {
    // @unchecked: `handlers`, `deadlines`, `nextTag`, `nextDeadline` and `state` are touched only
    // on the loop's thread (checked); `inbox` is guarded by its lock; `owner` is written by the
    // thread that turns the loop before its turn — once by `run`, at each call by `drive` (a test's
    // one caller) — and read by it.

    /// A watched descriptor, for ``rewatch(_:for:)`` and ``unwatch(_:)``.
    package struct Registration: Hashable, Sendable {
        fileprivate let tag: UInt64
    }

    /// A scheduled action, for ``cancel(_:)``.
    package struct Deadline: Hashable, Sendable {
        fileprivate let id: UInt64
    }

    private enum State {
        case idle
        case running
        case stopping
    }

    /// The time its deadlines are kept in.
    package let clock: LoopClock
    private let epoll: Epoll
    private let wakeCounter: FileDescriptor
    private static let wakeTag: UInt64 = 0
    private var handlers: [UInt64: (descriptor: Int32, handler: (EpollEvents) -> Void)] = [:]
    /// Pending deadlines, unordered: there are a handful at most, and a scan allocates nothing
    /// (a monitor sampling usage wakes up to 200 times a second).
    private var deadlines: [(id: UInt64, at: ContinuousClock.Instant, action: () -> Void)] = []
    private var nextTag: UInt64 = 1
    private var nextDeadline: UInt64 = 1
    private var state = State.idle
    /// Turned by ``drive()`` (a test), never by ``run(_:)``.
    private var isDriven = false
    /// What `epoll_wait` fills, kept between turns.
    private var events = [epoll_event](repeating: epoll_event(), count: 32)
    private var owner: pthread_t?
    /// Work handed over by other threads; `closed` once the loop has ended (later work is dropped,
    /// so nothing it holds is kept alive by a loop that will never run it).
    private let inbox = Locked<(work: [@Sendable () -> Void], closed: Bool)>(([], false))

    /// A loop that is not running yet, on `clock`.
    ///
    /// - Throws: ``SystemError`` from `epoll_create1`, `eventfd` or `epoll_ctl`.
    package init(clock: LoopClock = .continuous) throws(SystemError) {
        self.clock = clock
        epoll = try Epoll()
        wakeCounter = try .eventCounter()
        try epoll.add(wakeCounter.rawValue, events: .readable, tag: Self.wakeTag)
    }

    /// Whether the calling thread is the loop's.
    package var isOnLoop: Bool {
        guard let owner else { return false }
        return pthread_equal(owner, pthread_self()) != 0
    }

    /// Stops the program when called off the loop's thread, in release builds too (as
    /// swift-nio's `preconditionInEventLoop`): a `pthread_self` and a `pthread_equal`, on calls
    /// that come a few at a time per kernel event, never on a cache's or a pool's path.
    package func preconditionOnLoop(_ function: StaticString = #function) {
        precondition(isOnLoop, "EventLoop: \(function) must be called on the loop's thread")
    }

    // MARK: Descriptors

    /// Watches a descriptor; `handler` gets the events that fired. The caller keeps the
    /// descriptor open until it unwatches it.
    ///
    /// - Returns: the registration, for ``rewatch(_:for:)`` and ``unwatch(_:)``.
    /// - Throws: ``SystemError`` from `epoll_ctl(ADD)`.
    @discardableResult
    package func watch(
        _ descriptor: borrowing FileDescriptor, for events: EpollEvents,
        _ handler: @escaping (EpollEvents) -> Void
    ) throws(SystemError) -> Registration {
        preconditionOnLoop()
        let tag = nextTag
        try epoll.add(descriptor.rawValue, events: events, tag: tag)
        nextTag += 1
        handlers[tag] = (descriptor.rawValue, handler)
        return Registration(tag: tag)
    }

    /// Changes the events watched, for example to pause a flooding source with ``EpollEvents/none``
    /// and resume it later.
    ///
    /// - Throws: ``SystemError`` from `epoll_ctl(MOD)`; `ENOENT` for a registration that was
    ///   unwatched.
    package func rewatch(_ registration: Registration, for events: EpollEvents) throws(SystemError) {
        preconditionOnLoop()
        guard let entry = handlers[registration.tag] else { throw SystemError("epoll_ctl(MOD)", errno: ENOENT) }
        try epoll.modify(entry.descriptor, events: events, tag: registration.tag)
    }

    /// Whether a registration is still watched (not unwatched since).
    package func isWatching(_ registration: Registration) -> Bool {
        preconditionOnLoop()
        return handlers[registration.tag] != nil
    }

    /// Stops watching: no event of this registration is delivered after this returns, not even
    /// one already fetched in the current turn. The caller closes the descriptor afterwards.
    /// Unwatching twice is harmless.
    package func unwatch(_ registration: Registration) {
        preconditionOnLoop()
        guard let entry = handlers.removeValue(forKey: registration.tag) else { return }
        do {
            try epoll.remove(entry.descriptor)
        } catch {
            // Only a descriptor closed before it was unwatched gets here (EBADF; closing it had
            // already removed it from the epoll set): a bug of the caller's, harmless otherwise.
            assertionFailure("EventLoop.unwatch: \(error)")
        }
    }

    // MARK: Deadlines

    /// The loop's clock's current instant: what runs on the loop reads time here.
    package var now: ContinuousClock.Instant { clock.now }

    /// Runs `action` once at `instant`.
    ///
    /// - Returns: the deadline, for ``cancel(_:)``.
    @discardableResult
    package func schedule(at instant: ContinuousClock.Instant, _ action: @escaping () -> Void) -> Deadline {
        preconditionOnLoop()
        let id = nextDeadline
        nextDeadline += 1
        deadlines.append((id, instant, action))
        return Deadline(id: id)
    }

    /// Cancels a deadline that has not run; a deadline that ran or was cancelled is ignored.
    package func cancel(_ deadline: Deadline) {
        preconditionOnLoop()
        if let index = deadlines.firstIndex(where: { $0.id == deadline.id }) {
            deadlines.swapAt(index, deadlines.count - 1)
            deadlines.removeLast()
        }
    }

    // MARK: Running

    /// Runs `work` on the loop's thread soon. Safe from any thread, also before the loop runs;
    /// work handed over after the loop ended is dropped.
    package func execute(_ work: @escaping @Sendable () -> Void) {
        let accepted = inbox.withLock { inbox in
            guard !inbox.closed else { return false }
            inbox.work.append(work)
            return true
        }
        guard accepted else { return }
        do {
            try wakeCounter.signalCounter()
        } catch {
            // An eventfd write fails only when its counter would overflow, which needs 2^64 - 1
            // pending wake-ups: the loop is awake anyway.
        }
    }

    /// Ends ``run(_:)`` after the current turn. Use ``execute(_:)`` to stop from another thread.
    package func stop() {
        preconditionOnLoop()
        state = .stopping
    }

    /// Makes the calling thread the loop's, runs `setup` there (to register the first
    /// descriptors), then runs the loop until ``stop()``.
    ///
    /// - Throws: what `setup` throws (the loop does not run then), or ``SystemError`` from
    ///   `epoll_wait`, which ends the loop.
    package func run(_ setup: () throws -> Void = {}) throws {
        precondition(owner == nil && state == .idle && !isDriven, "EventLoop.run: a loop runs once, and a driven loop never")
        owner = pthread_self()
        state = .running
        defer {
            // Ended: work handed over from now on is dropped, and what waits now never runs.
            let dropped = inbox.withLock { inbox in
                inbox.closed = true
                defer { inbox.work.removeAll() }
                return inbox.work
            }
            withExtendedLifetime(dropped) {}
        }
        try setup()
        while state == .running { try turn(milliseconds: millisecondsToNextDeadline()) }
    }

    /// Turns the loop on the calling thread without waiting, until nothing is left to do now:
    /// the work handed over, every descriptor ready, every deadline due by the loop's ``clock``
    /// (also those the actions schedule for now), and the descriptors a deadline watched again
    /// (a pause's end) that were ready by then. Each call makes the calling thread the loop's
    /// until the next (a test's task may move between threads at each `await`): one caller
    /// drives a loop, and a driven loop is never run. For tests on a ``ManualClock``.
    ///
    /// - Throws: ``SystemError`` from `epoll_wait`.
    package func drive() throws(SystemError) {
        precondition(isDriven || (owner == nil && state == .idle), "EventLoop.drive: a loop that run() turns is not driven")
        isDriven = true
        owner = pthread_self()
        for _ in 0..<10_000 {
            let ranDeadlines = try turn(milliseconds: 0)
            guard ranDeadlines || earliestDeadline(where: { [clock] _, at in at <= clock.now }) != nil || inbox.withLock({ !$0.work.isEmpty }) else {
                return
            }
        }
        preconditionFailure("EventLoop.drive: still busy after 10 000 turns (a deadline that schedules itself for now?)")
    }

    /// Drives the loop (``drive()``) until `condition` holds, waiting in between for a descriptor
    /// or for work handed over by another thread (a registrar's, a child's output) — never for a
    /// deadline, which only the clock's moving makes due — at most `limit` of real time.
    ///
    /// - Returns: whether `condition` held.
    /// - Throws: ``SystemError`` from `epoll_wait`.
    package func drive(until condition: () -> Bool, within limit: Duration) throws(SystemError) -> Bool {
        let end = ContinuousClock.now + limit
        while true {
            try drive()
            if condition() { return true }
            let left = ContinuousClock.now.duration(to: end)
            guard left > .zero else { return false }
            try turn(milliseconds: Int32(clamping: left.roundedUpMilliseconds))
        }
    }

    /// One turn: waits at most `milliseconds` (-1: until something happens) for descriptors, runs
    /// the handlers of those that fired and the work handed over, then the deadlines due.
    ///
    /// - Returns: whether a deadline ran.
    @discardableResult
    private func turn(milliseconds: Int32) throws(SystemError) -> Bool {
        let count = try epoll.wait(into: &events, milliseconds: milliseconds)
        for index in 0..<count {
            let tag = events[index].data.u64
            if tag == Self.wakeTag {
                _ = try? wakeCounter.readCounter()
                for work in inbox.withLock({ inbox in
                    defer { inbox.work.removeAll() }
                    return inbox.work
                }) { work() }
            } else if let entry = handlers[tag] {
                entry.handler(EpollEvents(rawValue: events[index].events))
            }
            // else: unwatched earlier in this turn; its descriptor number may be another file's now.
        }
        return runDueDeadlines()
    }

    /// The index of the earliest pending deadline among those `included` admits.
    private func earliestDeadline(where included: (UInt64, ContinuousClock.Instant) -> Bool = { _, _ in true }) -> Int? {
        var earliest: Int?
        for index in deadlines.indices where included(deadlines[index].id, deadlines[index].at) {
            if earliest.map({ deadlines[index].at < deadlines[$0].at }) ?? true { earliest = index }
        }
        return earliest
    }

    private func millisecondsToNextDeadline() -> Int32 {
        guard let next = earliestDeadline() else { return -1 }
        let remaining = clock.now.duration(to: deadlines[next].at)
        return remaining <= .zero ? 0 : Int32(clamping: remaining.roundedUpMilliseconds)
    }

    /// Runs the deadlines due when the turn began, earliest first (one an action cancels does
    /// not run; one it schedules waits for the next turn).
    ///
    /// - Returns: whether one ran.
    private func runDueDeadlines() -> Bool {
        let now = clock.now
        let scheduledBefore = nextDeadline
        var ran = false
        while let index = earliestDeadline(where: { id, at in at <= now && id < scheduledBefore }) {
            let action = deadlines[index].action
            deadlines.swapAt(index, deadlines.count - 1)
            deadlines.removeLast()
            action()
            ran = true
        }
        return ran
    }
}

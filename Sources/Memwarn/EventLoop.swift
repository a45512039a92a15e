import CgroupKit
import Synchronization
import CLibcgroup
#if canImport(Glibc)
import Glibc
#endif

/// One epoll loop on a thread of its own: file descriptors and deadlines, nothing else.
///
/// It sleeps in `epoll_wait` with no timeout unless a deadline is pending, so it uses no CPU
/// while nothing happens. Everything registered runs on the loop's thread; other threads
/// talk to it only through ``execute(_:)``, which wakes it through an eventfd.
final class EventLoop: @unchecked Sendable {
    // @unchecked: `handlers`, `deadlines` and `running` are touched only on the loop's thread;
    // `inbox` is guarded by its Mutex; the two descriptors never change after init.
    private let epollDescriptor: Int32
    private let wakeDescriptor: Int32
    private var handlers: [Int32: (UInt32) -> Void] = [:]
    private var deadlines: [Int: (at: ContinuousClock.Instant, action: () -> Void)] = [:]
    private var nextDeadlineID = 0
    private var running = true
    private let inbox = Mutex<[@Sendable () -> Void]>([])

    init() throws(CgroupError) {
        epollDescriptor = epoll_create1(Int32(EPOLL_CLOEXEC))
        guard epollDescriptor >= 0 else { throw Self.systemError("epoll_create1") }
        wakeDescriptor = eventfd(0, Int32(EFD_CLOEXEC | EFD_NONBLOCK))
        guard wakeDescriptor >= 0 else {
            close(epollDescriptor)
            throw Self.systemError("eventfd")
        }
        var event = epoll_event(events: EPOLLIN.rawValue, data: epoll_data_t(fd: wakeDescriptor))
        epoll_ctl(epollDescriptor, EPOLL_CTL_ADD, wakeDescriptor, &event)
    }

    deinit {
        close(wakeDescriptor)
        close(epollDescriptor)
    }

    /// Watches a descriptor. `events` are epoll flags (`EPOLLIN`, `EPOLLPRI`); the handler
    /// gets the flags that fired. Loop thread only.
    func watch(_ descriptor: Int32, events: UInt32, handler: @escaping (UInt32) -> Void) throws(CgroupError) {
        var event = epoll_event(events: events, data: epoll_data_t(fd: descriptor))
        guard epoll_ctl(epollDescriptor, EPOLL_CTL_ADD, descriptor, &event) == 0 else { throw Self.systemError("epoll_ctl(ADD)") }
        handlers[descriptor] = handler
    }

    /// Stops watching a descriptor (the caller closes it). Loop thread only.
    func unwatch(_ descriptor: Int32) {
        epoll_ctl(epollDescriptor, EPOLL_CTL_DEL, descriptor, nil)
        handlers[descriptor] = nil
    }

    /// Changes the flags watched on a descriptor, for example to pause a flooding source
    /// with `0` and resume it later. Loop thread only.
    func rewatch(_ descriptor: Int32, events: UInt32) {
        var event = epoll_event(events: events, data: epoll_data_t(fd: descriptor))
        epoll_ctl(epollDescriptor, EPOLL_CTL_MOD, descriptor, &event)
    }

    /// Runs `action` once at `instant`. Returns an ID for ``cancelDeadline(_:)``. Loop thread only.
    @discardableResult
    func schedule(at instant: ContinuousClock.Instant, _ action: @escaping () -> Void) -> Int {
        nextDeadlineID += 1
        deadlines[nextDeadlineID] = (instant, action)
        return nextDeadlineID
    }

    /// Cancels a deadline that has not run. Loop thread only.
    func cancelDeadline(_ id: Int) {
        deadlines[id] = nil
    }

    /// Runs `work` on the loop's thread soon. Safe from any thread.
    func execute(_ work: @escaping @Sendable () -> Void) {
        inbox.withLock { $0.append(work) }
        var one: UInt64 = 1
        _ = Glibc.write(wakeDescriptor, &one, 8)
    }

    /// Ends ``run()`` after the current turn. Loop thread only (use ``execute(_:)`` elsewhere).
    func stop() {
        running = false
    }

    /// Runs the loop on the calling thread until ``stop()``.
    func run() {
        var events = [epoll_event](repeating: epoll_event(), count: 32)
        while running {
            let timeout = millisecondsToNextDeadline()
            let count = epoll_wait(epollDescriptor, &events, Int32(events.count), timeout)
            if count < 0 && errno != EINTR { break }
            for index in 0..<max(0, Int(count)) {
                let descriptor = events[index].data.fd
                if descriptor == wakeDescriptor {
                    var value: UInt64 = 0
                    _ = Glibc.read(wakeDescriptor, &value, 8)
                    for work in inbox.withLock({ work in defer { work.removeAll() }; return work }) { work() }
                } else if let handler = handlers[descriptor] {
                    handler(events[index].events)
                }
            }
            runDueDeadlines()
        }
    }

    private func millisecondsToNextDeadline() -> Int32 {
        guard let next = deadlines.values.map(\.at).min() else { return -1 }
        let remaining = ContinuousClock.now.duration(to: next)
        if remaining <= .zero { return 0 }
        let (seconds, attoseconds) = remaining.components
        return Int32(clamping: seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000)
    }

    private func runDueDeadlines() {
        let now = ContinuousClock.now
        let due = deadlines.filter { $0.value.at <= now }.sorted { $0.value.at < $1.value.at }
        for (id, entry) in due {
            deadlines[id] = nil
            entry.action()
        }
    }

    static func systemError(_ call: String, path: String? = nil) -> CgroupError {
        let error = errno
        return CgroupError(.unsupported, "\(call) failed: \(String(cString: strerror(error)))", path: path, errno: error)
    }
}

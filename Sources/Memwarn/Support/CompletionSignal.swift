#if canImport(Glibc)
import Glibc
#endif

/// A one-time signal a thread can wait for, with a time limit: how a thread of memwarn's own
/// (never one of Swift concurrency's) waits for async work it started.
final class CompletionSignal: @unchecked Sendable {
    // @unchecked: `signalled` is read and written only under `mutex`; the pthread objects are
    // allocated once and never moved.
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    private var signalled = false

    init() {
        pthread_mutex_init(mutex, nil)
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    /// Wakes the waiter (now or when it comes). Any thread.
    func signal() {
        pthread_mutex_lock(mutex)
        signalled = true
        pthread_mutex_unlock(mutex)
        pthread_cond_broadcast(condition)
    }

    /// Blocks until ``signal()`` or until `limit` has passed.
    ///
    /// - Returns: whether it was signalled.
    func wait(atMost limit: Duration) -> Bool {
        var deadline = timespec()
        clock_gettime(CLOCK_MONOTONIC, &deadline)
        let (seconds, attoseconds) = max(limit, .zero).components
        let nanoseconds = Int(deadline.tv_nsec) + Int(attoseconds / 1_000_000_000)
        deadline.tv_sec += Int(seconds) + nanoseconds / 1_000_000_000
        deadline.tv_nsec = nanoseconds % 1_000_000_000
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        while !signalled {
            if pthread_cond_timedwait(condition, mutex, &deadline) == ETIMEDOUT { break }
        }
        return signalled
    }
}

#if canImport(Glibc)
import Glibc
#endif

/// A value guarded by a mutex, with a condition variable for threads that wait until the value
/// says something has happened (a child ended, a line arrived).
///
/// For threads of their own (a child's waiter, a pipe's reader, a blocking test helper): a
/// task of Swift's pool should await instead.
package final class ConditionLock<State>: @unchecked Sendable {
    // @unchecked: `state` is read and written only with `mutex` held; the mutex and the
    // condition are allocated once and never move.
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let condition: UnsafeMutablePointer<pthread_cond_t>
    private var state: State

    package init(_ state: State) {
        self.state = state
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
        condition = .allocate(capacity: 1)
        condition.initialize(to: pthread_cond_t())
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        pthread_cond_destroy(condition)
        condition.deallocate()
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Runs `body` with the state; wakes every waiter afterwards, so they look again.
    package func withLock<T>(_ body: (inout State) throws -> T) rethrows -> T {
        pthread_mutex_lock(mutex)
        defer {
            pthread_cond_broadcast(condition)
            pthread_mutex_unlock(mutex)
        }
        return try body(&state)
    }

    /// Blocks until `condition` finds what it looks for in the state, or until `timeout` passes.
    ///
    /// - Parameters:
    ///   - timeout: how long at most; `nil` for ever.
    ///   - condition: called with the lock held, at once and after every change; returns what
    ///     was waited for, or `nil` to go on waiting.
    /// - Returns: what `condition` found, or `nil` when `timeout` passed first.
    package func wait<T>(timeout: Duration?, until condition: (inout State) -> T?) -> T? {
        let deadline = timeout.map { Self.monotonicNow() + max(0, $0.microseconds) * 1_000 }
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        while true {
            if let found = condition(&state) { return found }
            guard let deadline else {
                pthread_cond_wait(self.condition, mutex)
                continue
            }
            guard Self.monotonicNow() < deadline else { return nil }
            var until = timespec(tv_sec: Int(deadline / 1_000_000_000), tv_nsec: Int(deadline % 1_000_000_000))
            pthread_cond_timedwait(self.condition, mutex, &until)
        }
    }

    private static func monotonicNow() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec)
    }
}

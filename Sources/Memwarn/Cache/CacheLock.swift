#if canImport(Glibc)
import Glibc
#endif

/// A plain mutex for state that holds non-`Sendable` values (a cache's entries), where
/// `Synchronization.Mutex`'s `sending` rules would forbid handing a stored value out.
final class CacheLock: @unchecked Sendable {
    // @unchecked: the pthread mutex is the synchronization; it is allocated once and never moved.
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>

    init() {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    @inline(__always) func lock() { pthread_mutex_lock(mutex) }
    @inline(__always) func unlock() { pthread_mutex_unlock(mutex) }

    @inline(__always) func withLock<T>(_ body: () throws -> T) rethrows -> T {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }
}

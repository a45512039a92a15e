#if canImport(Glibc)
public import Glibc
#endif

/// A pthread mutex.
///
/// Used instead of `Synchronization.Mutex` where state holds non-`Sendable` values (a
/// cache's entries: `Mutex`'s `sending` rules would forbid handing one out), and in the types
/// the thread-sanitizer run exercises: TSan does not see `Mutex`'s futex and reports false races.
@usableFromInline
final class Lock: @unchecked Sendable {
    // @unchecked: the pthread mutex is the synchronization; it is allocated once and never moved.
    @usableFromInline let mutex: UnsafeMutablePointer<pthread_mutex_t>

    @usableFromInline
    init() {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    @inlinable func lock() { pthread_mutex_lock(mutex) }
    @inlinable func unlock() { pthread_mutex_unlock(mutex) }

    @inlinable func withLock<T>(_ body: () throws -> T) rethrows -> T {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }
}

/// A value guarded by a ``Lock`` (shared with the package's other modules).
package final class Locked<Value>: @unchecked Sendable {
    // @unchecked: `value` is read and written only inside `withLock`, under `lock`.
    private let lock = Lock()
    private var value: Value

    package init(_ value: Value) { self.value = value }

    package func withLock<T>(_ body: (inout Value) throws -> T) rethrows -> T {
        try lock.withLock { try body(&value) }
    }
}

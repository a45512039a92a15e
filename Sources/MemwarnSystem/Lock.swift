#if canImport(Glibc)
public import Glibc
#endif

/// A pthread mutex: the lock of every module in the package but the cache's read-mostly lock
/// (MemwarnStores), whose writers take a word of their own with ``Futex``.
///
/// Used instead of `Synchronization.Mutex` for two reasons: the thread sanitizer does not see
/// `Mutex`'s futex, so it reports accesses under one as races (it did, once in about thirty
/// runs, on a resource pool's state); and state holding non-`Sendable` values (a cache's
/// entries) cannot go through `Mutex`'s `sending` rules. (It sees that word's atomics:
/// they are compiled in the package's modules, with the sanitizer.)
@usableFromInline
package final class Lock: @unchecked Sendable {
    // @unchecked: the pthread mutex is the synchronization; it is allocated once and never moved.
    @usableFromInline let mutex: UnsafeMutablePointer<pthread_mutex_t>

    @usableFromInline
    package init() {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    @inlinable package func lock() { pthread_mutex_lock(mutex) }
    @inlinable package func unlock() { pthread_mutex_unlock(mutex) }

    @inlinable package func withLock<T: ~Copyable, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }
}

/// A value guarded by a ``Lock``.
package final class Locked<Value: ~Copyable>: @unchecked Sendable {
    // @unchecked: `value` is read and written only inside `withLock`, under `lock`.
    @usableFromInline let lock = Lock()
    @usableFromInline var value: Value

    @inlinable package init(_ value: consuming sending Value) { self.value = value }

    /// Runs `body` with the value, under the lock. As with `Synchronization.Mutex`, what goes in
    /// and out is `sending`: a non-`Sendable` value inside cannot leak to another thread.
    /// Inlinable, so a caller in another module gets a specialized call, not a generic one.
    @inlinable package func withLock<T: ~Copyable, E: Error>(_ body: (inout sending Value) throws(E) -> sending T) throws(E) -> sending T {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}

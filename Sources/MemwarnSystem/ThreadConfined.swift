#if canImport(Glibc)
import Glibc
#endif

/// A value made on one thread and used on one other only, once handed over: an engine given to
/// its loop's thread, a threshold a registrar hands to the loop, an agent given to its thread.
///
/// Every read of ``value`` checks that it is on the value's thread — the loop's, for a value
/// confined to an ``EventLoop``; else the first thread that read it — and stops the program
/// otherwise, in release builds too: the `@unchecked Sendable` is a checked promise, not a
/// comment. The check is a `pthread_equal` (and, for a value confined to its first reader, a
/// lock), on reads that come a few at a time per kernel event or agent round. The hand-over itself
/// (a thread's start, the loop's locked inbox) orders the value's making before its reads.
package final class ThreadConfined<Value>: @unchecked Sendable {
    // @unchecked: `confined` is read only on its thread, which `loop` or `owner` checks.
    private let confined: Value
    private let loop: EventLoop?
    private let owner = Locked<pthread_t?>(nil)

    /// Confines `value` to `loop`'s thread.
    package init(_ value: Value, on loop: EventLoop) {
        confined = value
        self.loop = loop
    }

    /// Confines `value` to the thread that reads it first.
    package init(_ value: Value) {
        confined = value
        loop = nil
    }

    /// The value, on its thread.
    package var value: Value {
        precondition(isOnItsThread(), "ThreadConfined: \(Value.self) read off its thread")
        return confined
    }

    private func isOnItsThread() -> Bool {
        if let loop { return loop.isOnLoop }
        let current = pthread_self()
        return owner.withLock { owner in
            guard let owner else {
                owner = current
                return true
            }
            return pthread_equal(owner, current) != 0
        }
    }
}

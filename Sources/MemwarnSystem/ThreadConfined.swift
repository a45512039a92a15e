/// A value made on one thread and used on an event loop's thread only, once handed over: an
/// engine given to its loop's thread, a threshold a registrar hands to the loop, an agent given to
/// its thread.
///
/// Every read of ``value`` checks that it is on the loop's thread and stops the program otherwise,
/// in release builds too: the `@unchecked Sendable` is a checked promise, not a comment. The check
/// is a `pthread_self` and a `pthread_equal`, on reads that come a few at a time per kernel event
/// or agent round. The hand-over itself (a thread's start, the loop's locked inbox) orders the
/// value's making before its reads.
package final class ThreadConfined<Value>: @unchecked Sendable {
    // @unchecked: `confined` is read only on `loop`'s thread, which `value` checks.
    private let confined: Value
    private let loop: EventLoop

    /// Confines `value` to `loop`'s thread.
    package init(_ value: Value, on loop: EventLoop) {
        confined = value
        self.loop = loop
    }

    /// The value, on its thread.
    package var value: Value {
        precondition(loop.isOnLoop, "ThreadConfined: \(Value.self) read off its loop's thread")
        return confined
    }
}

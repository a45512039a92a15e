import CLinuxCalls
public import Synchronization

/// The kernel's futex on a 32-bit atomic word: a thread sleeps until another changes the word,
/// for a lock that takes its fast path with one atomic instruction and sleeps only when it must.
/// The word must not move while anyone sleeps on it (the kernel finds sleepers by its address).
@usableFromInline
package enum Futex {
    /// Sleeps while `word` holds `expected`; returns when woken, at once if it holds anything
    /// else, and also without cause (a signal): callers check the word again.
    package static func wait(on word: UnsafeMutablePointer<Atomic<UInt32>>, whileItHolds expected: UInt32) {
        _ = memwarn_futex_wait(UnsafeMutableRawPointer(word), expected)
    }

    /// Wakes every thread asleep on `word`.
    @usableFromInline
    package static func wakeAll(on word: UnsafeMutablePointer<Atomic<UInt32>>) {
        _ = memwarn_futex_wake(UnsafeMutableRawPointer(word), Int32.max)
    }
}

import CLinuxCalls
public import Synchronization

/// A 32-bit atomic word that threads can sleep on until another changes it: the kernel's futex,
/// for a lock that takes its fast path with one atomic instruction and sleeps only when it must.
///
/// Allocated once and never moved (the kernel finds sleepers by the word's address).
@usableFromInline
package final class FutexWord: @unchecked Sendable {
    // @unchecked: the word is an atomic in memory of its own, freed only at deinit.
    /// The word, for its atomic operations (`word.pointee.load(ordering:)` and the rest).
    @usableFromInline package let word: UnsafeMutablePointer<Atomic<UInt32>>

    /// A word holding `value`, alone on its cache line.
    package init(_ value: UInt32) {
        word = UnsafeMutableRawPointer.allocate(byteCount: 64, alignment: 64).bindMemory(to: Atomic<UInt32>.self, capacity: 1)
        word.initialize(to: Atomic(value))
    }

    deinit {
        word.deinitialize(count: 1)
        UnsafeMutableRawPointer(word).deallocate()
    }

    /// Sleeps while the word holds `expected`; returns when woken, at once if it holds anything
    /// else, and also without cause (a signal): callers check the word again.
    package func wait(whileItHolds expected: UInt32) {
        _ = memwarn_futex_wait(UnsafeMutableRawPointer(word), expected)
    }

    /// Wakes every thread asleep on the word.
    @usableFromInline
    package func wakeAll() {
        _ = memwarn_futex_wake(UnsafeMutableRawPointer(word), Int32.max)
    }
}

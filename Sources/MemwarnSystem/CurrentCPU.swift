import CLinuxCalls

/// The processor the calling thread runs on.
@usableFromInline
package enum CurrentCPU {
    /// Its number, from 0, or -1 when the system cannot say (`sched_getcpu`). glibc (2.35 and
    /// later) reads it from the thread's rseq area, without a system call: a few nanoseconds.
    /// By the time the caller looks, the thread may have moved: a hint, as for picking a
    /// per-CPU counter. Not inlinable, so a module that inlines a caller need not see the C
    /// module; the call is one direct call to glibc's.
    @usableFromInline
    package static func number() -> Int {
        Int(sched_getcpu())
    }
}

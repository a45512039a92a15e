import CLinuxCalls

/// The CPU the calling thread runs on, or -1 when the system cannot say (``ReadMostlyLock``
/// picks a reader's counter by it). Not inlinable, so clients need not see the C module; glibc
/// reads it from the thread's rseq area, so the call costs a few nanoseconds.
@usableFromInline
func currentCPU() -> Int {
    Int(sched_getcpu())
}

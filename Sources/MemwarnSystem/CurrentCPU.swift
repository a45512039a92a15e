public import CLinuxCalls  // public: the inlinable read is compiled into the modules that inline it

/// The processor the calling thread runs on.
@usableFromInline
package enum CurrentCPU {
    /// Its number, from 0, or -1 when the system cannot say. On glibc 2.35 and later it is one
    /// load from the thread's rseq area, inlined into the caller (a cache's read takes it on every
    /// hit: the call into `sched_getcpu` it replaces cost ~4 ns more, measured); elsewhere it asks
    /// `sched_getcpu`. By the time the caller looks, the thread may have moved: a hint, as for
    /// picking a per-CPU counter.
    @inlinable
    package static func number() -> Int {
        Int(memwarn_current_cpu())
    }
}

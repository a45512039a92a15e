import CLinuxCalls

#if canImport(Glibc)
import Glibc
#endif

/// This process's resource limits, as `getrlimit` reads them.
package enum ResourceLimits {
    /// The soft limit on open descriptors (`ulimit -n`, `RLIMIT_NOFILE`), or `nil` when there is
    /// none (`RLIM_INFINITY`) or it cannot be read.
    package static var openDescriptors: UInt64? {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur != rlim_t.max else { return nil }
        return UInt64(limit.rlim_cur)
    }
}

#if canImport(Glibc)
import Glibc
#endif

/// The kernel's clocks that Swift's clocks do not give as such (`clock_gettime`).
package enum KernelClock {
    /// The wall clock: the time since the Unix epoch (`CLOCK_REALTIME`). It jumps when the
    /// system's time is set: for dating a record, never for measuring an interval.
    ///
    /// - Returns: the time since 1970-01-01 00:00 UTC.
    package static func sinceEpoch() -> Duration {
        read(CLOCK_REALTIME) ?? .zero
    }

    /// The time since the system booted, suspended time included (`CLOCK_BOOTTIME`): the clock
    /// of the start times in `/proc/PID/stat`.
    ///
    /// - Returns: the time, or `nil` when the kernel has no such clock.
    package static func sinceBoot() -> Duration? {
        read(CLOCK_BOOTTIME)
    }

    private static func read(_ clock: clockid_t) -> Duration? {
        var now = timespec()
        guard clock_gettime(clock, &now) == 0 else { return nil }
        return .seconds(now.tv_sec) + .nanoseconds(now.tv_nsec)
    }
}

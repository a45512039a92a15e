#if canImport(Glibc)
import Glibc
#endif

/// A wall-clock time as every JSON line of memwarn's tools writes it: ISO 8601 in UTC, to the
/// millisecond, such as `2026-11-22T00:21:31.481Z` (what Foundation's `ISO8601DateFormatter`
/// writes with `.withInternetDateTime` and `.withFractionalSeconds`, and reads back).
package enum ISO8601Time {
    /// The time `sinceEpoch` after 1970-01-01 00:00 UTC (``KernelClock/sinceEpoch()``).
    ///
    /// - Parameter sinceEpoch: the time since the Unix epoch.
    /// - Returns: the time as ISO 8601, milliseconds truncated.
    package static func string(sinceEpoch: Duration) -> String {
        let (seconds, attoseconds) = sinceEpoch.components
        var wholeSeconds = time_t(seconds)
        var milliseconds = Int(attoseconds / 1_000_000_000_000_000)
        if milliseconds < 0 {  // before the epoch: the second before, and what is left of it
            wholeSeconds -= 1
            milliseconds += 1_000
        }
        var parts = tm()
        guard gmtime_r(&wholeSeconds, &parts) != nil else { return "1970-01-01T00:00:00.000Z" }
        func padded(_ value: Int32, _ width: Int) -> String {
            let digits = String(value)
            return String(repeating: "0", count: max(0, width - digits.count)) + digits
        }
        return "\(padded(parts.tm_year + 1900, 4))-\(padded(parts.tm_mon + 1, 2))-\(padded(parts.tm_mday, 2))"
            + "T\(padded(parts.tm_hour, 2)):\(padded(parts.tm_min, 2)):\(padded(parts.tm_sec, 2)).\(padded(Int32(milliseconds), 3))Z"
    }

    /// The wall clock now, as ISO 8601.
    package static func now() -> String {
        string(sinceEpoch: KernelClock.sinceEpoch())
    }
}

import MemwarnSystem

/// How long this process has existed, as the kernel counts it: `/proc/self/stat`'s start time
/// (field 22, clock ticks since boot) against `CLOCK_BOOTTIME`.
///
/// The kernel keeps the start time in clock ticks (`sysconf(_SC_CLK_TCK)`, 100 a second on
/// Linux), so the age is good to 10 ms.
package enum ProcessAge {
    /// The age now, or `nil` when `/proc/self/stat` cannot be read or parsed.
    ///
    /// - Parameter files: where `/proc` is read (a fixture tree in tests).
    /// - Returns: the time since the process started, to a clock tick.
    package static func now(files: KernelFiles = .host) -> Duration? {
        guard let text = try? files.read("/proc/self/stat"), let ticks = startTicks(stat: text) else { return nil }
        guard let boot = KernelClock.sinceBoot() else { return nil }
        let perSecond = UInt64(SystemConfiguration.clockTicksPerSecond)
        let started = Duration.seconds(Int64(ticks / perSecond)) + .milliseconds(Int64(ticks % perSecond * 1000 / perSecond))
        let age = boot - started
        return max(.zero, age)
    }

    /// The start time (field 22) of a `/proc/PID/stat` line, in clock ticks since boot.
    ///
    /// The second field, the command's name in parentheses, may hold spaces and parentheses of
    /// its own: the fields are counted from the last `)`.
    ///
    /// - Parameter stat: the file's text.
    /// - Returns: the start time, or `nil` when the line has too few fields or it is not a number.
    package static func startTicks(stat: String) -> UInt64? {
        guard let close = stat.lastIndex(of: ")") else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ", omittingEmptySubsequences: true)
        // After the name come field 3 (state) onwards: field 22 is the 20th of them.
        guard fields.count >= 20 else { return nil }
        return UInt64(fields[19])
    }
}

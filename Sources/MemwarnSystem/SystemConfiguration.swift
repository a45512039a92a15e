#if canImport(Glibc)
import Glibc
#endif

/// Figures of the system that do not change while the process runs (`sysconf`). Each is at
/// least 1: a figure the system cannot give is 1.
package enum SystemConfiguration {
    /// The kernel's clock ticks a second (`_SC_CLK_TCK`, 100 on Linux): the unit of the times
    /// in `/proc/PID/stat`.
    package static let clockTicksPerSecond = figure(_SC_CLK_TCK)

    /// The processors online now (`_SC_NPROCESSORS_ONLN`).
    package static var onlineProcessors: Int { figure(_SC_NPROCESSORS_ONLN) }

    /// The processors the system has, online or not (`_SC_NPROCESSORS_CONF`): the highest CPU
    /// number a thread may run on is less than this.
    package static let configuredProcessors = figure(_SC_NPROCESSORS_CONF)

    private static func figure(_ name: Int) -> Int {
        max(1, sysconf(Int32(name)))
    }
}

import MemwarnRelease
import MemwarnTestFixtures
import MemwarnTestKit

@testable import MemwarnMonitor

#if canImport(Glibc)
import Glibc
#endif

/// The usage thresholds a root monitor on cgroup v1 registers for `limit` on the default policy:
/// the 10 of the marks and every 5 % from half the limit up, and a guard below each of the 3
/// marks, as bytes (a guard that falls on a 5 % threshold — hosts with 3 CPUs or more, at 64 MiB —
/// is that threshold, registered once).
func expectedUsageThresholds(limit: UInt64) -> (thresholds: Set<UInt64>, guards: Set<UInt64>) {
    let thresholds = Set([0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95].map { UInt64(Double(limit) * $0) })
    let band = SamplingRule.guardBand(capacity: limit, processors: max(1, sysconf(Int32(_SC_NPROCESSORS_ONLN))))
    let guards = Set([0.7, 0.8, 0.9].map { UInt64(Double(limit) * $0) - band })
    return (thresholds, guards)
}

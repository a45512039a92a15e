package import CgroupKit
import Foundation

/// What a ``PressureMonitor`` watches and how.
public struct MonitorConfiguration: Sendable {
    /// The levels' marks, hysteresis and timing.
    public var policy: PressurePolicy
    /// The cgroup to watch, as in `/proc/PID/cgroup` or an absolute path under its mount;
    /// `nil` watches this process's own memory cgroup.
    public var cgroupPath: String?
    /// Whether memory pressure stall (PSI) counts: its triggers (or their sampling fallback)
    /// wake the monitor, and its `avg10` averages raise the level (``PressurePolicy/psiSomeWarningPercent``,
    /// ``PressurePolicy/psiFullCriticalPercent``). With `false` the levels come from usage
    /// against the limit and the cgroup's own notifications; snapshots still carry the PSI they
    /// read. Turn it off when the PSI file read is not the watched cgroup's own: on cgroup v1 it
    /// is the monitor's cgroup2 group or the whole system's, which another workload's reclaim
    /// can raise (`memwarn run` does). systemd's pressure watch is the service manager's
    /// request and follows ``environment``, not this flag.
    public var watchesPressureStall: Bool = true
    /// The environment consulted for systemd's `MEMORY_PRESSURE_WATCH` / `MEMORY_PRESSURE_WRITE`,
    /// and for `MEMWARN_DISABLE`.
    public var environment: [String: String]
    /// Where kernel files are read (the host; tests may point elsewhere).
    package var files: KernelFiles = .host

    /// A configuration.
    ///
    /// - Parameters:
    ///   - policy: the policy; load one with ``PressurePolicy/load(file:environment:)``.
    ///   - cgroupPath: the cgroup to watch, or `nil` for this process's own.
    ///   - environment: the environment read for systemd's `MEMORY_PRESSURE_WATCH` and
    ///     `MEMORY_PRESSURE_WRITE`; `nil` (the default) reads this process's, so a service
    ///     manager's settings reach the monitor; pass `[:]` to ignore them (tests).
    public init(policy: PressurePolicy = PressurePolicy(), cgroupPath: String? = nil, environment: [String: String]? = nil) {
        self.policy = policy
        self.cgroupPath = cgroupPath
        self.environment = environment ?? ProcessInfo.processInfo.environment
    }

    /// The environment variable that turns memwarn off in a process: `MEMWARN_DISABLE=1` (or
    /// `true`, `yes`, `on`) and the monitor neither reads the kernel nor reports a level — no
    /// warning, no release, no exhaustion, no termination — while the service runs as if
    /// memwarn were not linked. `memwarn soak` sets it for its baseline run: the same binary,
    /// limit and load, without memwarn. `0`, `false`, `no`, `off` or empty leave memwarn on; any
    /// other value is an error (``PressureMonitor/run()`` throws it).
    package static let disableVariable = "MEMWARN_DISABLE"

    /// Whether ``environment`` turns the monitor off (`MEMWARN_DISABLE`).
    ///
    /// - Returns: `true` for `1`, `true`, `yes`, `on` (in any case); `false` when unset, empty,
    ///   `0`, `false`, `no` or `off`.
    /// - Throws: ``MonitorError`` for any other value.
    public func isDisabled() throws(MonitorError) -> Bool {
        guard let value = environment[Self.disableVariable]?.lowercased() else { return false }
        if ["1", "true", "yes", "on"].contains(value) { return true }
        if ["", "0", "false", "no", "off"].contains(value) { return false }
        throw MonitorError(
            .badSetting, "\(Self.disableVariable)=\(environment[Self.disableVariable] ?? ""): expected 1 to turn memwarn off, or 0 (or unset) to keep it on")
    }
}

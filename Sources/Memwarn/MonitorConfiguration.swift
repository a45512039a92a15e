public import CgroupKit
import Foundation

/// What a ``PressureMonitor`` watches and how.
public struct MonitorConfiguration: Sendable {
    /// The levels' marks, hysteresis and timing.
    public var policy: PressurePolicy
    /// The cgroup to watch, as in `/proc/PID/cgroup` or an absolute path under its mount;
    /// `nil` watches this process's own memory cgroup.
    public var cgroupPath: String?
    /// Whether to register PSI triggers (or their sampling fallback).
    public var watchesPressureStall: Bool = true
    /// The environment consulted for systemd's `MEMORY_PRESSURE_WATCH` / `MEMORY_PRESSURE_WRITE`.
    public var environment: [String: String]
    /// Where kernel files are read (the host; tests may point elsewhere).
    public var files: KernelFiles = .host
    /// The control endpoint `memwarn trigger` talks to: off unless asked for
    /// (`servesControlEndpoint`) or the environment says `MEMWARN_CONTROL=on`; see
    /// ``ControlConfiguration``.
    public var control: ControlConfiguration

    /// A configuration.
    ///
    /// - Parameters:
    ///   - policy: the policy; load one with ``PressurePolicy/load(file:environment:)``.
    ///   - cgroupPath: the cgroup to watch, or `nil` for this process's own.
    ///   - environment: the environment read for systemd's `MEMORY_PRESSURE_WATCH` and
    ///     `MEMORY_PRESSURE_WRITE` and for `MEMWARN_CONTROL`; `nil` (the default) reads this
    ///     process's, so a service manager's settings reach the monitor; pass `[:]` to ignore
    ///     them (tests).
    ///   - servesControlEndpoint: whether the application asks for the control endpoint that
    ///     `memwarn trigger` talks to (`MEMWARN_CONTROL` in `environment` decides last).
    public init(policy: PressurePolicy = PressurePolicy(), cgroupPath: String? = nil,
                environment: [String: String]? = nil, servesControlEndpoint: Bool = false) {
        let environment = environment ?? ProcessInfo.processInfo.environment
        self.policy = policy
        self.cgroupPath = cgroupPath
        self.environment = environment
        self.control = ControlConfiguration(isRequested: servesControlEndpoint, environment: environment)
    }
}

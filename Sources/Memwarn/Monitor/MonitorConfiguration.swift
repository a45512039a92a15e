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
}

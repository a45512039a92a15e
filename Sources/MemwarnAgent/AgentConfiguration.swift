package import CgroupKit
package import MemwarnMonitor

/// What a node agent watches and how it asks.
package struct AgentConfiguration: Sendable {
    /// The parent cgroup whose limit the services below it share (a systemd slice, a pod, the
    /// kubelet's `kubepods.slice`), or `nil` to watch the node alone.
    package var parent: CgroupLocation?
    /// The node's eviction-style floor: pressure when `MemAvailable` nears it (the agent's
    /// capacity is `MemTotal` minus this), as the kubelet's `memory.available` threshold reads.
    package var minAvailableBytes: UInt64?
    /// The directories searched for control endpoints (`<pid>.sock`; a pattern with `*` is
    /// matched afresh as directories appear).
    package var controlDirectories: [String]
    /// The marks (warning, critical, recovery) applied to the parent, the hysteresis and hold,
    /// and the sampling bounds: the parent is watched by the monitor's own engine.
    package var policy: PressurePolicy
    /// How long one ask may take; a service that has not answered within it is left out for
    /// 30 s. A slow answer holds up no other ask: after ``askPatience`` the next service is asked
    /// beside it.
    package var askTimeout: Duration = .seconds(2)
    /// The lease given to each service (renewed every ``renewEvery``): how long a service waits
    /// before counting the parent's limit again when the agent stops renewing (it died).
    package var lease: Duration = .seconds(5)
    /// How often each lease is renewed: every third of the lease, at most every second, each
    /// service on its own schedule (a 1 s lease is renewed every 333 ms).
    package var renewEvery: Duration { min(.seconds(1), lease / 3) }

    /// How long an ask is waited for before the next service is asked beside it.
    package static let askPatience = Duration.milliseconds(250)

    package init(parent: CgroupLocation?, minAvailableBytes: UInt64?, controlDirectories: [String], policy: PressurePolicy) {
        self.parent = parent
        self.minAvailableBytes = minAvailableBytes
        self.controlDirectories = controlDirectories
        self.policy = policy
    }
}

package import CgroupKit
package import Memwarn

/// What a node agent watches and how it asks.
package struct AgentConfiguration: Sendable {
    /// The parent cgroup whose limit the services below it share (a systemd slice, a pod, the
    /// kubelet's `kubepods.slice`), or `nil` to watch the node alone.
    package var parent: CgroupLocation?
    /// The node's eviction-style floor: pressure when `MemAvailable` nears it (the agent's
    /// capacity is `MemTotal` minus this), as the kubelet's `memory.available` threshold reads.
    package var minAvailableBytes: UInt64?
    /// The directories searched for control endpoints (`<pid>.sock`).
    package var controlDirectories: [String]
    /// The marks (warning, critical, recovery) applied to the parent, and the sampling bounds.
    package var policy: PressurePolicy
    /// How long one ask may take before the agent goes on to the next service.
    package var askTimeout: Duration = .seconds(2)
    /// The lease given to each service (renewed every ``renewEvery``): how long a service waits
    /// before counting the parent's limit again when the agent stops renewing (it died).
    package var lease: Duration = .seconds(5)
    /// How often leases are renewed.
    package var renewEvery: Duration = .seconds(1)
    /// How often the control directories and the parent's children are searched again (a
    /// listing; only a new socket costs an exchange).
    package var discoverEvery: Duration = .milliseconds(250)
    /// The wait between two rounds of asks while the parent stays above its recovery mark.
    package var roundCooldown: Duration = .seconds(1)

    package init(parent: CgroupLocation?, minAvailableBytes: UInt64?, controlDirectories: [String], policy: PressurePolicy) {
        self.parent = parent
        self.minAvailableBytes = minAvailableBytes
        self.controlDirectories = controlDirectories
        self.policy = policy
    }
}

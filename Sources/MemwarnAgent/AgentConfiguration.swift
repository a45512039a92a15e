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
    /// The directories searched for control endpoints (`<pid>.sock`).
    package var controlDirectories: [String]
    /// The marks (warning, critical, recovery) applied to the parent, and the sampling bounds.
    package var policy: PressurePolicy
    /// How long one ask may take before the agent goes on to the next service.
    package var askTimeout: Duration = .seconds(2)
    /// The lease given to each service (renewed every ``renewEvery``): how long a service waits
    /// before counting the parent's limit again when the agent stops renewing (it died).
    package var lease: Duration = .seconds(5)
    /// How often leases are renewed: every third of the lease, at most every second, so that a
    /// renewal that waits on a hung endpoint's batch (at most 250 ms) or a missed turn still
    /// comes before the lease runs out (a 1 s lease is renewed every 333 ms).
    package var renewEvery: Duration { min(.seconds(1), lease / 3) }
    /// How often the control directories and the parent's children are searched again (a
    /// listing; only a new socket costs an exchange), on the roster's thread.
    package var discoverEvery: Duration = .milliseconds(250)
    /// The wait between two rounds of asks while the parent is between its recovery and warning
    /// marks (the releases of the last round take effect).
    package var roundCooldown: Duration = .seconds(1)
    /// The wait between two rounds while the parent is still past its warning mark after a round:
    /// growth outpaces the releases, and the next round follows almost at once.
    package var pressingRoundPause: Duration = .milliseconds(20)

    package init(parent: CgroupLocation?, minAvailableBytes: UInt64?, controlDirectories: [String], policy: PressurePolicy) {
        self.parent = parent
        self.minAvailableBytes = minAvailableBytes
        self.controlDirectories = controlDirectories
        self.policy = policy
    }
}

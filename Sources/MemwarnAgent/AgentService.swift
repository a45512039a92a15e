package import CgroupKit

/// A memwarn service the agent found: a control endpoint whose listening process (by
/// `SO_PEERCRED`, never by what the endpoint says) lies in the parent's subtree.
package struct AgentService: Sendable, Hashable {
    /// The process that listens on the socket, as the kernel names it.
    package var pid: Int32
    package var uid: UInt32
    package var socketPath: String
    /// The process's memory cgroup (from `/proc/PID/cgroup`).
    package var cgroup: CgroupLocation
}

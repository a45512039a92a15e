// A node agent's side of the monitor: the ancestors it coordinates (``AgentLeases``).
extension PressureMonitor {
    /// A node agent (`memwarn agent`, through the control endpoint) coordinates an ancestor's
    /// limit for `duration` (renewed as it runs): the monitor leaves that limit out of its
    /// readings until the lease runs out, then counts it again. The cgroup's own limit is never
    /// left out.
    ///
    /// - Parameters:
    ///   - cgroupPath: the ancestor, as its path inside the memory mount.
    ///   - agentPid: the agent's pid (from the endpoint's peer credentials).
    ///   - duration: the lease, at most a minute.
    package func coordinate(cgroupPath: String, agentPid: Int32, for duration: Duration) {
        let isNew = leases.grant(cgroupPath: cgroupPath, agentPid: agentPid, for: duration)
        if isNew {
            logger.notice("memory monitor: a node agent coordinates an ancestor's limit", metadata: ["cgroup": "\(cgroupPath)", "agent": "\(agentPid)"])
        }
        currentSession?.leaseGranted(isNew: isNew, agentPid: agentPid)
    }

    /// The agent stops coordinating `cgroupPath`: its limit counts again at once.
    package func endCoordination(cgroupPath: String) {
        guard leases.revoke(cgroupPath: cgroupPath) else { return }
        logger.notice("memory monitor: the node agent stopped coordinating an ancestor's limit", metadata: ["cgroup": "\(cgroupPath)"])
        currentSession?.leaseRevoked()
    }

    /// The ancestors coordinated now, with the agents' pids.
    package var coordinatedCgroups: [String: Int32] { leases.current().mapValues(\.agentPid) }

    /// A node agent asked this service to release (a `warn` request from the agent's pid): it
    /// answers the crossings of the limits it coordinates, so the backstop leaves them to it
    /// (``AgentLeases``).
    package func noteAgentAsk(agentPid: Int32) {
        leases.noteAsk(agentPid: agentPid)
    }
}

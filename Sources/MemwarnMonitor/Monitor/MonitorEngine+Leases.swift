import MemwarnSystem

// A node agent's leases (``LeaseTimers``): granted, renewed and revoked on the loop thread.
extension MonitorEngine {
    /// A node agent began or renewed coordinating an ancestor's limit (``AgentLeases``): read
    /// now when it is new (the limit is left out from now on), and again the moment the lease
    /// would run out unrenewed (the limit counts again).
    func leaseGranted(isNew: Bool, agentPid: Int32) {
        loop.preconditionOnLoop()
        guard isRunning else { return }
        leaseTimers?.granted(isNew: isNew, agentPid: agentPid)
    }

    /// A lease ended at the agent's word (it stops): read now, the limit counts again.
    func leaseRevoked() {
        loop.preconditionOnLoop()
        guard isRunning else { return }
        leaseTimers?.revoked()
    }
}

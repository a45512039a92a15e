import MemwarnSystem

/// The ancestors whose pressure a node agent (`memwarn agent`) coordinates for this process,
/// each until its lease runs out.
///
/// An agent that watches a parent cgroup tells each memwarn service under it, through the
/// service's control endpoint (`ControlRequest.coordinate(cgroupPath:lease:)`), that it
/// coordinates that parent, and renews the lease every second. While the lease holds, the
/// service's monitor leaves that parent's limit out of its readings (the agent asks the services
/// under it to release, largest first, one at a time), and keeps every other limit, its own
/// included. An agent that dies stops renewing: when the lease runs out the monitor counts that
/// parent again on its next reading (it schedules one for the moment the lease ends). Sooner,
/// where the agent's pid is visible (the same pid namespace): the monitor watches the agent's
/// end through a pidfd, and an agent that dies — killed mid-release, say — gives every limit
/// back to the services' own monitors within a loop turn.
package final class AgentLeases: Sendable {
    struct Lease: Sendable, Hashable {
        /// The agent's pid, as the endpoint's peer credentials gave it.
        var agentPid: Int32
        var until: ContinuousClock.Instant
    }

    private let leases = Locked<[String: Lease]>([:])

    /// The longest lease an agent may ask for.
    package static let longestLease = Duration.seconds(60)

    /// Grants or renews a lease.
    ///
    /// - Returns: whether the cgroup was not coordinated before (a reading should follow).
    @discardableResult
    func grant(cgroupPath: String, agentPid: Int32, for duration: Duration, now: ContinuousClock.Instant = .now) -> Bool {
        leases.withLock { leases in
            let isNew = leases[cgroupPath].map { $0.until <= now } ?? true
            leases[cgroupPath] = Lease(agentPid: agentPid, until: now + min(duration, Self.longestLease))
            return isNew
        }
    }

    /// Ends a lease at once (the agent stops).
    ///
    /// - Returns: whether there was one.
    @discardableResult
    func revoke(cgroupPath: String) -> Bool {
        leases.withLock { $0.removeValue(forKey: cgroupPath) != nil }
    }

    /// Ends every lease of an agent at once (it has ended).
    ///
    /// - Returns: the cgroups it coordinated.
    @discardableResult
    func revokeAll(agentPid: Int32) -> [String] {
        leases.withLock { leases in
            let ended = leases.filter { $0.value.agentPid == agentPid }.map(\.key)
            for cgroup in ended { leases[cgroup] = nil }
            return ended
        }
    }

    /// The cgroups coordinated now, with their leases; expired ones are forgotten.
    func current(now: ContinuousClock.Instant = .now) -> [String: Lease] {
        leases.withLock { leases in
            // Every full reading asks: no lease (the usual case) costs a lock and nothing more.
            if leases.contains(where: { $0.value.until <= now }) { leases = leases.filter { $0.value.until > now } }
            return leases
        }
    }
}

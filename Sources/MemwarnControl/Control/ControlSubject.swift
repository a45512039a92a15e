import MemwarnMonitor
import MemwarnRelease
import MemwarnSystem

#if canImport(Glibc)
import Glibc
#endif

/// What a control endpoint answers for: a running monitor's latest reading, and the
/// coordinator that releases on request.
struct ControlSubject: Sendable {
    /// The monitor's latest level event, `nil` before its first reading.
    var latestEvent: @Sendable () -> LevelEvent?
    /// The coordinator release requests go to.
    var coordinator: ReleaseCoordinator
    /// The monitor a node agent's `coordinate` goes to (`nil` once it is gone).
    var monitor: @Sendable () -> PressureMonitor?

    /// Answers a request from the peer `peerPid`; a release runs here, on the caller's thread.
    /// The summary form (`summary`) folds a status's consumers and a report's entries into one a
    /// tier (`foldedByTier()`, ``/MemwarnRelease/ReleaseReport/foldedByTier()``):
    /// a reply of a few hundred bytes whatever the service registers.
    func reply(to request: ControlRequest, from peerPid: Int32, summary: Bool = false) -> ControlReply {
        switch request {
        case .status:
            return .status(summary ? status(withSources: false).foldedByTier() : status(withSources: true))
        case .warn(let level, let targetBytes):
            // A warning on request is a warning: the coordinator's responders hear it first.
            let report = warn(level: level, targetBytes: targetBytes, from: peerPid)
            return .released(request: request.name, pid: getpid(), report: summary ? report.foldedByTier() : report)
        case .terminateSuspended(let targetBytes):
            let report = coordinator.release(level: .critical, targetBytes: targetBytes, tiers: [.suspendedUnits])
            return .released(request: request.name, pid: getpid(), report: summary ? report.foldedByTier() : report)
        case .coordinate(let cgroupPath, let lease):
            return coordinate(cgroupPath, lease: lease, agentPid: peerPid)
        }
    }

    /// A lease for an agent on a proper ancestor of the monitor's cgroup.
    private func coordinate(_ cgroupPath: String, lease: Duration, agentPid: Int32) -> ControlReply {
        guard let monitor = monitor() else { return .failure("the monitor is gone") }
        guard let own = latestEvent()?.snapshot.cgroup?.path else { return .failure("the monitor watches no memory cgroup") }
        let normalized = cgroupPath.count > 1 && cgroupPath.hasSuffix("/") ? String(cgroupPath.dropLast()) : cgroupPath
        guard normalized != own, normalized == "/" || own.hasPrefix(normalized + "/") else {
            return .failure(
                ControlRequest.refusedForGood + "\(cgroupPath) is not an ancestor of this service's memory cgroup \(own): its own limit stays its own")
        }
        if lease == .zero {
            monitor.endCoordination(cgroupPath: normalized)
        } else {
            monitor.coordinate(cgroupPath: normalized, agentPid: agentPid, for: lease)
        }
        let granted = min(lease, AgentLeases.longestLease)
        return .coordinated(pid: getpid(), cgroupPath: normalized, leaseMilliseconds: Int(granted.wholeMilliseconds))
    }

    private func warn(level: MemoryPressureLevel, targetBytes: Int, from peerPid: Int32) -> ReleaseReport {
        monitor()?.noteAgentAsk(agentPid: peerPid)  // a leasing agent's ask answers its crossing (the backstop)
        if level > .normal { _ = coordinator.deliverMemoryWarning(level: level) }
        return coordinator.release(level: level, targetBytes: targetBytes)
    }

    /// The status; the monitor's sources only when asked (the summary form leaves them out, and
    /// a node agent asks for it at every renewal).
    private func status(withSources: Bool) -> ControlStatus {
        let latest = latestEvent()
        let consumers = coordinator.consumers
            .map {
                // The consumers' words, kept plausible: one negative figure would make the whole
                // reply unreadable to the soak and the node agent (sizes are checked when read).
                let footprint = max(0, $0.footprintBytes)
                let inUse = $0.inUseBytes.map { min(max(0, $0), footprint) }
                return (tier: $0.tier, entry: ControlStatus.Consumer(name: $0.name, tier: $0.tier.name, footprintBytes: footprint, inUseBytes: inUse))
            }
            .sorted { $0.tier != $1.tier ? $0.tier < $1.tier : ($0.entry.footprintBytes, $1.entry.name) > ($1.entry.footprintBytes, $0.entry.name) }
        var status = ControlStatus(
            pid: getpid(), level: latest?.level ?? .normal, usageBytes: latest?.snapshot.usageBytes,
            limitBytes: latest?.snapshot.limit?.bytes, cgroupPath: latest?.snapshot.cgroup?.path,
            consumers: consumers.map(\.entry))
        status.released = coordinator.totals
        if let monitor = monitor() {
            status.isMemoryExhausted = monitor.isMemoryExhausted
            status.forecasts = monitor.forecastTally
            status.coordinatedCgroups = monitor.coordinatedCgroups.keys.sorted()
            if withSources { status.monitorSources = monitor.watchedSources }
        }
        status.process = ProcessMemory.current()
        return status
    }
}

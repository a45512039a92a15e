import MemwarnSystem

// The parent's children that hold no service: said as they appear, counted in the metrics.
extension ServiceRoster {
    /// Looks at the parent's children again after `wait` (or sooner, if already due sooner).
    func scheduleUnlinked(after wait: Duration = .milliseconds(100)) {
        let at = loop.now + wait
        if let pending = unlinkedDeadline {
            guard pending.at > at else { return }
            loop.cancel(pending.deadline)
        }
        let deadline = loop.schedule(at: at) { [weak self] in
            self?.unlinkedDeadline = nil
            self?.noteUnlinked()
        }
        unlinkedDeadline = (deadline, at)
    }

    /// The parent's children with no service: said as they appear, counted in the metrics, and
    /// looked at again every ``ControlDirectoryWatch/searchInterval``.
    func noteUnlinked() {
        let found = admission.unlinked(besides: services)
        let unlinked = found.map(\.cgroup)
        for child in found where !unlinkedSeen.contains(child.cgroup) {
            var record = AgentRecord("unlinked")
            (record.cgroup, record.serviceUsageBytes) = (child.cgroup, child.usageBytes)
            say(record)
        }
        unlinkedSeen = unlinked
        metrics?.set(AgentMetricFamilies.unlinkedCgroups.name, Double(unlinked.count))
        metrics?.publish()
        scheduleUnlinked(after: ControlDirectoryWatch.searchInterval)
    }
}

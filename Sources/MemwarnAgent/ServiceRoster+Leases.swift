import MemwarnControl
import MemwarnMonitor
import MemwarnSystem

// The leases: each service's own, renewed on its own schedule.
extension ServiceRoster {
    /// How long a renewal may take: half the lease (a renewal still under way when the next is due
    /// is not doubled). The service renews the lease when it reads the request, whenever its reply
    /// comes.
    var renewalTimeout: Duration { configuration.lease / 2 }

    /// Leases the parent to a service now, and schedules the next renewal (nothing to lease on a
    /// node without a parent). A refusal for good (the parent is no ancestor the service sees: a
    /// container's, say) is not asked again; a renewal that failed is said once, until one
    /// succeeds, and the next goes out on schedule.
    func renew(_ pid: Int32) {
        guard let parent = configuration.parent, var entry = entries[pid], !entry.leaseRefused else { return }
        entry.renewalDeadline = loop.schedule(at: loop.now + configuration.renewEvery) { [weak self] in
            self?.entries[pid]?.renewalDeadline = nil
            self?.renew(pid)
        }
        entries[pid] = entry
        guard entry.renewal == nil else { return }  // the last one is still under way
        let request = ControlRequest.coordinate(cgroupPath: parent.path, lease: configuration.lease)
        do {
            entries[pid]?.renewal = try ControlExchange(
                request.line, with: entry.service.socketPath, on: loop, timeout: renewalTimeout,
                admit: { (peer) throws(ControlError) in
                    guard peer.pid == pid else { throw ControlError(.endpointReplaced, "the socket now belongs to process \(peer.pid)") }
                },
                completion: { [unowned self] outcome in renewed(pid, outcome) })
        } catch {
            renewed(pid, .failure(error))
        }
    }

    private func renewed(_ pid: Int32, _ outcome: ControlExchange.Outcome) {
        guard var entry = entries[pid] else { return }
        entry.renewal = nil
        var failure: String
        switch outcome {
        case .failure(let error) where error.code == .endpointReplaced:
            entries[pid] = entry
            lose(pid, because: error.message)
            return
        case .failure(let error):
            failure = error.message
        case .success(let exchange):
            switch try? ControlReply(line: Array(exchange.reply.utf8)) {
            case .coordinated?:
                entry.leaseFailing = false
                entries[pid] = entry
                return
            case .failure(let message)? where message.hasPrefix(ControlRequest.refusedForGood):
                entry.leaseRefused = true
                if let pending = entry.renewalDeadline { loop.cancel(pending) }
                entry.renewalDeadline = nil
                entries[pid] = entry
                var record = AgentRecord("lease-refused")
                (record.pid, record.cgroup, record.reason) = (pid, entry.service.cgroup.path, message)
                say(record)
                return
            case .failure(let message)?:
                failure = message
            case .status?, .released?, nil:
                failure = "answered the lease with something else"
            }
        }
        let first = !entry.leaseFailing
        entry.leaseFailing = true
        entries[pid] = entry
        guard first else { return }
        var record = AgentRecord("lease-unrenewed")
        (record.pid, record.cgroup, record.reason) = (
            pid, entry.service.cgroup.path,
            failure + "; renewed again every \(PressurePolicy.formatDuration(configuration.renewEvery)) (its lease runs out unless one is heard)"
        )
        say(record)
    }

    /// Ends every lease at once (the agent stops): each service counts the parent's limit again.
    /// `finished` runs on the loop's thread once every service answered, or after `timeout`; by
    /// then no exchange is left watched on the loop (the loop may end, and its owners be released
    /// on another thread).
    func endLeases(within timeout: Duration, finished: @escaping () -> Void) {
        directories.stop()
        stopFinding()
        var waiting = 0
        var done = false
        let finish = { [self] in
            guard !done else { return }
            done = true
            for pid in entries.keys {
                entries[pid]?.renewal?.cancel()
                entries[pid]?.refresh?.cancel()
            }
            finished()
        }
        for (pid, entry) in entries {
            for exchange in [entry.renewal, entry.refresh].compactMap({ $0 }) { exchange.cancel() }
            for deadline in [entry.renewalDeadline, entry.refreshDeadline].compactMap({ $0 }) { loop.cancel(deadline) }
            entries[pid]?.renewal = nil
            entries[pid]?.refresh = nil
            guard let parent = configuration.parent, !entry.leaseRefused else { continue }
            do {
                entries[pid]?.renewal = try ControlExchange(
                    ControlRequest.coordinate(cgroupPath: parent.path, lease: .zero).line, with: entry.service.socketPath, on: loop, timeout: timeout,
                    admit: { (peer) throws(ControlError) in
                        guard peer.pid == pid else { throw ControlError(.endpointReplaced, "the socket now belongs to process \(peer.pid)") }
                    },
                    completion: { _ in
                        waiting -= 1
                        if waiting == 0 { finish() }
                    })
                waiting += 1
            } catch {
                continue  // gone, or another process's socket now: nothing to end
            }
        }
        if waiting == 0 {
            finish()
        } else {
            loop.schedule(at: loop.now + timeout) { finish() }
        }
    }
}

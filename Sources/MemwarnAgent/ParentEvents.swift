import CgroupKit
import MemwarnMonitor
import MemwarnSystem

/// The kernel's word that the parent changed, so the agent reads it the moment a mark is
/// crossed rather than at its next sample: on cgroup v1 (as root, who may write
/// `cgroup.event_control`) a usage threshold at each mark of the parent's limit (recovery,
/// warning, critical; they fire both ways); on cgroup v2 an inotify watch of the parent's
/// `memory.events` (its `high` and `max` events). Where the kernel offers nothing (v1 as another
/// user, the node's `MemAvailable` floor) the agent samples alone, at the adaptive rule's pace.
final class ParentEvents {
    /// What the kernel signals: the monitor's own sources (v1: a usage threshold a mark; v2:
    /// the watch of `memory.events`).
    private let sources: [any ParentEventSource]
    /// The limit the thresholds were planned for (`nil` on v2, where nothing depends on it).
    let plannedCapacity: UInt64?
    /// How the parent's changes reach the agent, for its `watching` line.
    let description: String

    /// The kernel's events for `parent` at `policy`'s marks of `capacity`, or none.
    init(parent: CgroupLocation?, capacityBytes: UInt64, policy: PressurePolicy, files: KernelFiles) {
        var sources: [any ParentEventSource] = []
        var planned: UInt64?
        var description = "sampled: no parent cgroup (the node's MemAvailable floor has no kernel event)"
        switch parent?.version {
        case .v1?:
            // The monitor's own notification, one usage threshold a mark.
            let parent = parent!
            planned = capacityBytes
            let marks = [policy.recoveryRatio, policy.warningRatio, policy.criticalRatio].filter { $0 <= 1 }.map { UInt64(Double(capacityBytes) * $0) }
            do {
                sources = try marks.map { bytes in
                    try CgroupV1Notification(
                        cgroup: parent, file: "memory.usage_in_bytes", argument: String(bytes), files: files, hint: .normal,
                        signal: .usageThreshold, description: "usage-threshold \(bytes)")
                }
                description =
                    "usage thresholds on \(parent.path) at \(marks.map(ByteSize.describe).joined(separator: ", ")) (the kernel's events), and sampling"
            } catch {
                sources = []
                description = "sampled: the parent's usage thresholds could not be registered (\(error)); cgroup v1 notifications are root's"
            }
        case .v2?:
            // The monitor's own watch of memory.events.
            let parent = parent!
            do {
                sources = [try MemoryEventsWatch(cgroup: parent, files: files)]
                description = "inotify \(parent.file("memory.events")) (its high and max events), and sampling"
            } catch {
                description = "sampled: \(parent.file("memory.events")) cannot be watched (\(error))"
            }
        case nil:
            break
        }
        (self.sources, plannedCapacity, self.description) = (sources, planned, description)
    }

    /// Waits until the kernel reports a change or `timeout` passes, and empties what it reported.
    ///
    /// - Returns: whether the kernel reported something.
    func wait(upTo timeout: Duration) -> Bool {
        guard !sources.isEmpty else {
            SystemThread.sleep(for: timeout)
            return false
        }
        guard let ready = try? ReadinessPoll.readable(sources.map(\.pollDescriptor), timeout: timeout), !ready.isEmpty else { return false }
        for index in ready { sources[index].acknowledge() }
        return true
    }

}

/// One descriptor the kernel signals: the monitor's own sources, polled here without an event loop.
private protocol ParentEventSource: AnyObject {
    var pollDescriptor: Int32 { get }
    func acknowledge()
}

extension CgroupV1Notification: ParentEventSource {}
extension MemoryEventsWatch: ParentEventSource {}

import CgroupKit
import Memwarn
import MemwarnSystem

#if canImport(Glibc)
import Glibc
#endif

/// The kernel's word that the parent changed, so the agent reads it the moment a mark is
/// crossed rather than at its next sample: on cgroup v1 (as root, who may write
/// `cgroup.event_control`) a usage threshold at each mark of the parent's limit (recovery,
/// warning, critical; they fire both ways); on cgroup v2 an inotify watch of the parent's
/// `memory.events` (its `high` and `max` events). Where the kernel offers nothing (v1 as another
/// user, the node's `MemAvailable` floor) the agent samples alone, at the adaptive rule's pace.
final class ParentEvents {
    /// What the kernel signals (v1: eventfds; v2: an inotify watch), each kept open with what
    /// it needs (v1: the usage file each threshold names).
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
            let parent = parent!
            planned = capacityBytes
            let marks = [policy.recoveryRatio, policy.warningRatio, policy.criticalRatio].filter { $0 <= 1 }.map { UInt64(Double(capacityBytes) * $0) }
            do throws(SystemError) {
                for bytes in marks {
                    let target = try FileDescriptor.open(files.path(parent.file("memory.usage_in_bytes")), O_RDONLY | O_CLOEXEC)
                    let counter = try FileDescriptor.eventCounter()
                    do {
                        try files.write("\(counter.rawValue) \(target.rawValue) \(bytes)", to: parent.file("cgroup.event_control"))
                    } catch {
                        throw SystemError("write cgroup.event_control", errno: error.errno ?? EACCES, path: parent.file("cgroup.event_control"))
                    }
                    sources.append(ThresholdSource(counter: counter, target: target))
                }
                description =
                    "usage thresholds on \(parent.path) at \(marks.map(ByteSize.describe).joined(separator: ", ")) (the kernel's events), and sampling"
            } catch {
                sources = []
                description = "sampled: the parent's usage thresholds could not be registered (\(error)); cgroup v1 notifications are root's"
            }
        case .v2?:
            let parent = parent!
            do {
                let watch = try InotifyWatch(modificationsOf: files.path(parent.file("memory.events")))
                sources.append(InotifySource(watch))
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
        guard let ready = try? ReadinessPoll.readable(sources.map(\.rawValue), timeout: timeout), !ready.isEmpty else { return false }
        for index in ready { sources[index].empty() }
        return true
    }

}

/// One descriptor the kernel signals, with what it needs kept open.
private protocol ParentEventSource: AnyObject {
    var rawValue: Int32 { get }
    /// Reads what was signalled: only "something changed" matters.
    func empty()
}

/// A v1 usage threshold: its eventfd, and the usage file it names.
private final class ThresholdSource: ParentEventSource {
    private let counter: FileDescriptor
    private let target: FileDescriptor
    let rawValue: Int32

    init(counter: consuming FileDescriptor, target: consuming FileDescriptor) {
        rawValue = counter.rawValue
        self.counter = counter
        self.target = target
    }

    func empty() { _ = try? counter.readCounter() }
}

/// A v2 `memory.events` watch.
private final class InotifySource: ParentEventSource {
    private let watch: InotifyWatch
    let rawValue: Int32

    init(_ watch: consuming InotifyWatch) {
        rawValue = watch.descriptor.rawValue
        self.watch = watch
    }

    func empty() { _ = try? watch.drain() }
}

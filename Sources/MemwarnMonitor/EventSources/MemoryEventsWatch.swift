package import CgroupKit
import MemwarnSystem

/// cgroup v2 `memory.events`, watched with inotify (`IN_MODIFY`): the kernel raises it when a
/// counter changes. Notifications coalesce, so every firing re-reads the counters and compares
/// them with the last ones: an OOM or OOM kill hints `critical`, a `max` event `critical`, a
/// `high` event `warning`, anything else is a change to look at.
package final class MemoryEventsWatch: PressureSource {
    private let watch: InotifyWatch
    private let reader: CgroupMemoryReader
    private let cgroup: CgroupLocation
    private var last: MemoryEventCounters
    let description: String

    /// Watches the memory cgroup `cgroup`'s `memory.events`.
    ///
    /// - Throws: `CgroupError` when the file cannot be read or watched.
    package init(cgroup: CgroupLocation, files: KernelFiles) throws(CgroupError) {
        self.cgroup = cgroup
        reader = CgroupMemoryReader(location: cgroup, files: files)
        let path = files.path(cgroup.file("memory.events"))
        last = try reader.events()
        do {
            watch = try InotifyWatch(modificationsOf: path)
        } catch {
            throw error.call == "inotify_add_watch"
                ? KernelFiles.openError(error.errno, path, writing: false)
                : CgroupError(.unsupported, "\(error)", path: path, errno: error.errno)
        }
        description = "inotify \(cgroup.file("memory.events"))"
    }

    func register(on loop: EventLoop, _ fired: @escaping (EpollEvents) -> Void) throws(SystemError) -> EventLoop.Registration? {
        try loop.watch(watch.descriptor, for: .readable, fired)
    }

    /// The inotify descriptor, for a caller that polls it without an event loop (the node agent).
    package var pollDescriptor: Int32 { watch.descriptor.rawValue }

    /// Empties what the kernel signalled (and takes in the counters), for a caller that only
    /// needs "it changed".
    package func acknowledge() { _ = drain([]) }

    func drain(_ fired: EpollEvents) -> PressureSourceReport {
        do {
            if try watch.drain() { return .failed(CgroupError(.notFound, "the cgroup was removed", path: cgroup.directory)) }
        } catch  where error.isTransient {
            return .retry(CgroupError(.unreadable, "\(error)", path: cgroup.file("memory.events"), errno: error.errno))
        } catch {
            return .failed(CgroupError(.unreadable, "\(error)", path: cgroup.file("memory.events"), errno: error.errno))
        }
        let counters: MemoryEventCounters
        do {
            counters = try reader.events()
        } catch  where error.isTransient {
            return .retry(error)  // compared with the last counters read: the change is seen on the retry
        } catch {
            return .failed(error)
        }
        defer { last = counters }
        if counters.oom > last.oom || counters.oomKill > last.oomKill || counters.oomGroupKill > last.oomGroupKill {
            return .wake(.critical, .oom)
        } else if counters.max > last.max {
            return .wake(.critical, .memoryEvents)
        } else if counters.high > last.high {
            return .wake(.warning, .memoryEvents)
        }
        return .wake(.readNow, .memoryEvents)
    }
}

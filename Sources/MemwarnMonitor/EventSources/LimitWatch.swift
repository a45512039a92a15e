import CgroupKit
import MemwarnSystem

/// The limit files of the watched memory cgroup and of each ancestor up to the mount's root
/// (v1 `memory.limit_in_bytes`; v2 `memory.max` and `memory.high`), watched with inotify
/// (`IN_MODIFY`, raised by every `write(2)` to them: `systemctl set-property`, a container
/// runtime's in-place resize, an administrator's `echo`). A change wakes the monitor for a full
/// reading, which moves the marks to the new limit — and, on cgroup v1 as root, has the usage
/// thresholds registered again for it (``MonitorEngine``).
///
/// A limit the monitor cannot see (an ancestor hidden by a cgroup namespace) is not watched: its
/// change is seen at the next full reading (``PressurePolicy/pollInterval`` where usage is
/// sampled continuously).
final class LimitWatch: PressureSource {
    private let watch: InotifyWatch
    private let cgroup: CgroupLocation
    /// The files watched, as the cgroup names them.
    let files: [String]
    var description: String { "inotify limits: \(files.joined(separator: ", "))" }

    /// The limit files of `cgroup` and its ancestors that exist.
    static func limitFiles(of cgroup: CgroupLocation, files: KernelFiles) -> [String] {
        let names = cgroup.version == .v1 ? ["memory.limit_in_bytes"] : ["memory.max", "memory.high"]
        var found: [String] = []
        var current: CgroupLocation? = cgroup
        while let location = current {
            for name in names where files.exists(location.file(name)) { found.append(location.file(name)) }
            current = location.parent
        }
        return found
    }

    /// Watches the limit files of `cgroup` and its ancestors, or `nil` when none exists.
    ///
    /// - Throws: `CgroupError` when a file that exists cannot be watched, or inotify is out of
    ///   instances.
    init?(cgroup: CgroupLocation, files: KernelFiles) throws(CgroupError) {
        self.cgroup = cgroup
        self.files = Self.limitFiles(of: cgroup, files: files)
        guard !self.files.isEmpty else { return nil }
        do {
            watch = try InotifyWatch(modificationsOf: self.files.map(files.path))
        } catch {
            throw error.call == "inotify_add_watch"
                ? KernelFiles.openError(error.errno, error.path ?? cgroup.directory, writing: false)
                : CgroupError(.unsupported, "\(error)", path: cgroup.directory, errno: error.errno)
        }
    }

    func register(on loop: EventLoop, _ fired: @escaping (EpollEvents) -> Void) throws(SystemError) -> EventLoop.Registration? {
        try loop.watch(watch.descriptor, for: .readable, fired)
    }

    /// A limit was written: read now. A removed file (its cgroup is gone) is not this source's
    /// to judge: the reading that follows finds out whether the watched cgroup still exists.
    func drain(_ fired: EpollEvents) -> PressureSourceReport {
        do {
            _ = try watch.drain()
        } catch  where error.isTransient {
            return .retry(CgroupError(.unreadable, "\(error)", path: cgroup.directory, errno: error.errno))
        } catch {
            return .gone(reason: "the limit files can no longer be watched (\(error)); a changed limit is seen at the next full reading")
        }
        return .wake(.readNow, .limitChange)
    }
}

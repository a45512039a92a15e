package import CgroupKit
package import MemwarnRelease
import MemwarnSystem

#if canImport(Glibc)
import Glibc
#endif

/// A cgroup v1 memory notification: an eventfd tied to a control file through
/// `cgroup.event_control` (`"<eventfd> <target fd> <argument>"`).
///
/// Used for usage thresholds (`memory.usage_in_bytes`, argument = bytes; they fire both on
/// the way up and on the way down), `memory.pressure_level` (`low|medium|critical`; it floods
/// under thrash, so it pauses after each firing) and `memory.oom_control`. The kernel also
/// signals the eventfd when the cgroup is removed.
package final class CgroupV1Notification: PressureSource {
    private let counter: FileDescriptor
    private let target: FileDescriptor
    private let hint: WakeHint
    private let signal: PressureSignal
    private let quietTime: Duration?
    let description: String

    /// Registers a notification.
    ///
    /// - Parameters:
    ///   - cgroup: a v1 memory cgroup.
    ///   - file: the target control file, such as `memory.usage_in_bytes`.
    ///   - argument: the threshold in bytes, the pressure level, or empty for OOM.
    ///   - hint: what a firing asks for by itself: ``WakeHint/readNow`` for a usage threshold (only
    ///     "usage crossed it, look"), a level for a pressure level or an OOM.
    ///   - signal: the source a firing is reported as.
    ///   - quietTime: how long to stop listening after a firing (coalescing a flood), or `nil`.
    ///   - description: the line for `watchedSources`.
    /// - Throws: `CgroupError` when the files cannot be opened or the kernel refuses it
    ///   (`.permissionDenied` for a user who may not write `cgroup.event_control`);
    ///   ``SystemError`` when no eventfd can be made.
    package init(
        cgroup: CgroupLocation, file: String, argument: String, files: KernelFiles, hint: WakeHint,
        signal: PressureSignal, quietTime: Duration? = nil, description: String
    ) throws {
        let targetPath = files.path(cgroup.file(file))
        do {
            target = try FileDescriptor.open(targetPath, O_RDONLY)
        } catch {
            throw KernelFiles.openError(error.errno, targetPath, writing: false)
        }
        counter = try .eventCounter()
        (self.hint, self.signal, self.quietTime, self.description) = (hint, signal, quietTime, description)
        let registration = argument.isEmpty ? "\(counter.rawValue) \(target.rawValue)" : "\(counter.rawValue) \(target.rawValue) \(argument)"
        try files.write(registration, to: cgroup.file("cgroup.event_control"))
    }

    func register(on loop: EventLoop, _ fired: @escaping (EpollEvents) -> Void) throws(SystemError) -> EventLoop.Registration? {
        try loop.watch(counter, for: .readable, fired)
    }

    /// The eventfd, for a caller that polls it without an event loop (the node agent).
    package var pollDescriptor: Int32 { counter.rawValue }

    /// Empties what the kernel signalled, for a caller that only needs "it fired".
    package func acknowledge() { _ = drain([]) }

    func drain(_ fired: EpollEvents) -> PressureSourceReport {
        guard let count = try? counter.readCounter(), count > 0 else { return .quiet }
        return .wake(hint, signal, then: quietTime.map { .pause($0) } ?? .keepWatching)
    }
}

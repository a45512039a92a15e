import CgroupKit
import CLibcgroup
#if canImport(Glibc)
import Glibc
#endif

/// A cgroup v1 memory notification: an eventfd tied to a control file through
/// `cgroup.event_control` (`"<eventfd> <target fd> <argument>"`).
///
/// Used for usage thresholds (`memory.usage_in_bytes`, argument = bytes; they fire both on
/// the way up and on the way down), `memory.pressure_level` (`low|medium|critical`) and
/// `memory.oom_control`. The kernel also signals the eventfd when the cgroup is removed.
final class CgroupV1Notification {
    /// The eventfd to watch for `EPOLLIN`.
    let descriptor: Int32
    private let target: Int32
    /// What it was registered for, for logs.
    let label: String

    /// Registers a notification.
    ///
    /// - Parameters:
    ///   - cgroup: a v1 memory cgroup.
    ///   - file: the target control file, such as `memory.usage_in_bytes`.
    ///   - argument: the threshold in bytes, the pressure level, or empty for OOM.
    /// - Throws: ``CgroupError`` when the files cannot be opened or the kernel refuses it.
    init(cgroup: CgroupLocation, file: String, argument: String, files: KernelFiles = .host) throws(CgroupError) {
        let targetPath = files.path(cgroup.file(file))
        target = open(targetPath, O_RDONLY | O_CLOEXEC)
        guard target >= 0 else { throw KernelFiles.openError(errno, targetPath, writing: false) }
        descriptor = eventfd(0, Int32(EFD_CLOEXEC | EFD_NONBLOCK))
        guard descriptor >= 0 else {
            close(target)
            throw EventLoop.systemError("eventfd")
        }
        label = argument.isEmpty ? file : "\(file) \(argument)"
        let registration = argument.isEmpty ? "\(descriptor) \(target)" : "\(descriptor) \(target) \(argument)"
        do {
            try files.write(registration, to: cgroup.file("cgroup.event_control"))
        } catch {
            close(descriptor)
            close(target)
            throw error
        }
    }

    /// Reads and resets the eventfd's counter: how many notifications arrived since the last read.
    func drain() -> UInt64 {
        var count: UInt64 = 0
        return Glibc.read(descriptor, &count, 8) == 8 ? count : 0
    }

    deinit {
        close(descriptor)
        close(target)
    }
}

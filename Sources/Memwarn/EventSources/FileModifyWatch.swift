import CgroupKit
import CLibcgroup
#if canImport(Glibc)
import Glibc
#endif

/// An inotify watch for `IN_MODIFY` on one kernfs file, such as cgroup v2 `memory.events`
/// or `cgroup.events`: the kernel raises it when the file's values change. Notifications
/// coalesce, so the reader always re-reads the file and compares.
final class FileModifyWatch {
    /// The inotify descriptor to watch for `EPOLLIN`.
    let descriptor: Int32
    let path: String

    init(path: String, files: KernelFiles = .host) throws(CgroupError) {
        self.path = path
        descriptor = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard descriptor >= 0 else { throw EventLoop.systemError("inotify_init1") }
        guard inotify_add_watch(descriptor, files.path(path), UInt32(IN_MODIFY)) >= 0 else {
            let error = KernelFiles.openError(errno, files.path(path), writing: false)
            close(descriptor)
            throw error
        }
    }

    /// Reads and discards the pending notifications; returns whether the watched file was
    /// removed (`IN_IGNORED`: the cgroup is gone).
    func drain() -> Bool {
        var buffer = [UInt8](repeating: 0, count: 4096)
        var removed = false
        while true {
            let count = buffer.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
            guard count > 0 else { break }
            var offset = 0
            while offset + MemoryLayout<inotify_event>.size <= count {
                let event = buffer.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset, as: inotify_event.self) }
                if event.mask & UInt32(IN_IGNORED) != 0 { removed = true }
                offset += MemoryLayout<inotify_event>.size + Int(event.len)
            }
        }
        return removed
    }

    deinit { close(descriptor) }
}

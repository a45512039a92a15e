import CLinuxCalls

#if canImport(Glibc)
import Glibc
#endif

/// An inotify instance watching files for modification (`IN_MODIFY`): a kernfs file such as
/// cgroup v2 `memory.events` raises it when its values change. Notifications coalesce, so a
/// reader always re-reads the file and compares. It may watch directories for new entries too
/// (``watchEntries(of:)``).
package struct InotifyWatch: ~Copyable {
    /// The inotify descriptor, readable when events are pending (non-blocking).
    package let descriptor: FileDescriptor

    /// Watches `path` for modification.
    ///
    /// - Throws: ``SystemError`` from `inotify_init1`, or from `inotify_add_watch` naming `path`.
    package init(modificationsOf path: String) throws(SystemError) {
        try self.init(modificationsOf: [path])
    }

    /// Watches each of `paths` for modification, on one descriptor.
    ///
    /// - Throws: ``SystemError`` from `inotify_init1`, or from `inotify_add_watch` naming the
    ///   path it could not watch.
    package init(modificationsOf paths: [String]) throws(SystemError) {
        let watch = FileDescriptor(adopting: try Syscall.retrying("inotify_init1") { inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC)) })
        let raw = watch.rawValue
        for path in paths {
            try Syscall.retrying("inotify_add_watch", path: path) { inotify_add_watch(raw, path, UInt32(IN_MODIFY)) }
        }
        descriptor = watch
    }

    /// Watches `directory` for entries made or moved into it (`IN_CREATE`, `IN_MOVED_TO`): a
    /// socket bound there, a folder made.
    ///
    /// - Throws: ``SystemError`` from `inotify_add_watch` naming `directory` (`ENOENT` while it
    ///   does not exist).
    package borrowing func watchEntries(of directory: String) throws(SystemError) {
        let raw = descriptor.rawValue
        try Syscall.retrying("inotify_add_watch", path: directory) { inotify_add_watch(raw, directory, UInt32(IN_CREATE | IN_MOVED_TO)) }
    }

    /// Reads and discards the pending events.
    ///
    /// - Returns: whether a watched file was removed (`IN_IGNORED`: for a cgroup file, the
    ///   cgroup is gone).
    /// - Throws: ``SystemError`` from `read`.
    package borrowing func drain() throws(SystemError) -> Bool {
        var buffer = [UInt8](repeating: 0, count: 4096)
        var removed = false
        while true {
            let count = try descriptor.read(into: &buffer) ?? 0
            guard count > 0 else { return removed }
            var offset = 0
            while offset + MemoryLayout<inotify_event>.size <= count {
                let event = buffer.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset, as: inotify_event.self) }
                if event.mask & UInt32(IN_IGNORED) != 0 { removed = true }
                offset += MemoryLayout<inotify_event>.size + Int(event.len)
            }
        }
    }
}

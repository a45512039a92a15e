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

    /// Watches `directory` for entries made, moved in, removed or moved out, and for its own
    /// removal (`IN_CREATE`, `IN_MOVED_TO`, `IN_DELETE`, `IN_MOVED_FROM`, `IN_DELETE_SELF`,
    /// `IN_MOVE_SELF`, and `IN_ONLYDIR`: a path that is not a directory fails), for a reader of
    /// ``events()``.
    ///
    /// - Returns: the watch's number, which ``Event/watch`` carries.
    /// - Throws: ``SystemError`` from `inotify_add_watch` naming `directory` (`ENOENT` while it
    ///   does not exist, `ENOSPC` when the user's watches are used up).
    package borrowing func watchChanges(of directory: String) throws(SystemError) -> Int32 {
        let raw = descriptor.rawValue
        let mask = IN_CREATE | IN_MOVED_TO | IN_DELETE | IN_MOVED_FROM | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR | IN_DONT_FOLLOW
        return try Syscall.retrying("inotify_add_watch", path: directory) { inotify_add_watch(raw, directory, UInt32(mask)) }
    }

    /// Stops a watch (harmless for one the kernel already removed).
    package borrowing func removeWatch(_ watch: Int32) {
        _ = inotify_rm_watch(descriptor.rawValue, watch)
    }

    /// One event: which watch, what happened, and the entry's name (empty for the watched
    /// directory itself).
    package struct Event: Sendable, Hashable {
        /// The watch's number (``watchChanges(of:)``); -1 for an overflow of the queue.
        package var watch: Int32
        package var mask: UInt32
        package var name: String

        /// An entry appeared (made or moved in).
        package var isAppearance: Bool { mask & UInt32(IN_CREATE | IN_MOVED_TO) != 0 }
        /// An entry went (removed or moved out).
        package var isDisappearance: Bool { mask & UInt32(IN_DELETE | IN_MOVED_FROM) != 0 }
        /// The watched directory itself went, or its watch ended.
        package var endsWatch: Bool { mask & UInt32(IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED) != 0 }
        /// Events were lost (the queue overflowed): whoever reads must look again.
        package var isOverflow: Bool { mask & UInt32(IN_Q_OVERFLOW) != 0 }
    }

    /// Reads the pending events, at most `limit` of them (the rest stay pending).
    ///
    /// - Throws: ``SystemError`` from `read`.
    package borrowing func events(limit: Int = 1024) throws(SystemError) -> [Event] {
        var buffer = [UInt8](repeating: 0, count: 16 << 10)
        var found: [Event] = []
        while found.count < limit {
            let count = try descriptor.read(into: &buffer) ?? 0
            guard count > 0 else { break }
            var offset = 0
            let header = MemoryLayout<inotify_event>.size
            while offset + header <= count {
                let event = buffer.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset, as: inotify_event.self) }
                let length = Int(event.len)
                let nameBytes = buffer[(offset + header)..<min(count, offset + header + length)].prefix { $0 != 0 }
                found.append(Event(watch: event.wd, mask: event.mask, name: String(decoding: nameBytes, as: UTF8.self)))
                offset += header + length
            }
        }
        return found
    }
}

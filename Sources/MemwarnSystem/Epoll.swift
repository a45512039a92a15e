package import CLinuxCalls

#if canImport(Glibc)
import Glibc
#endif

/// An epoll instance: the kernel's set of watched descriptors, each with a 64-bit tag that
/// comes back with its events.
package struct Epoll: ~Copyable {
    private let descriptor: FileDescriptor

    /// A new epoll instance (`EPOLL_CLOEXEC`).
    ///
    /// - Throws: ``SystemError`` from `epoll_create1`.
    package init() throws(SystemError) {
        descriptor = FileDescriptor(adopting: try Syscall.retrying("epoll_create1") { epoll_create1(Int32(EPOLL_CLOEXEC)) })
    }

    /// Watches `target` for `events`; its events come back with `tag`.
    ///
    /// - Throws: ``SystemError`` from `epoll_ctl(ADD)`.
    package borrowing func add(_ target: Int32, events: EpollEvents, tag: UInt64) throws(SystemError) {
        try control(EPOLL_CTL_ADD, "epoll_ctl(ADD)", target, events: events, tag: tag)
    }

    /// Changes what `target` is watched for.
    ///
    /// - Throws: ``SystemError`` from `epoll_ctl(MOD)`.
    package borrowing func modify(_ target: Int32, events: EpollEvents, tag: UInt64) throws(SystemError) {
        try control(EPOLL_CTL_MOD, "epoll_ctl(MOD)", target, events: events, tag: tag)
    }

    /// Stops watching `target`.
    ///
    /// - Throws: ``SystemError`` from `epoll_ctl(DEL)`: `EBADF` when it was closed already,
    ///   `ENOENT` when it was not watched.
    package borrowing func remove(_ target: Int32) throws(SystemError) {
        try control(EPOLL_CTL_DEL, "epoll_ctl(DEL)", target, events: [], tag: 0)
    }

    private borrowing func control(_ operation: Int32, _ name: String, _ target: Int32, events: EpollEvents, tag: UInt64) throws(SystemError) {
        var event = epoll_event(events: events.rawValue, data: epoll_data_t(u64: tag))
        try Syscall.retrying(name) { epoll_ctl(descriptor.rawValue, operation, target, &event) }
    }

    /// Waits for events.
    ///
    /// - Parameters:
    ///   - events: filled with what is ready, from its start.
    ///   - milliseconds: how long at most; -1 for ever.
    /// - Returns: how many entries of `events` were filled (0 on a timeout or an interruption).
    /// - Throws: ``SystemError`` from `epoll_wait`.
    package borrowing func wait(into events: inout [epoll_event], milliseconds: Int32) throws(SystemError) -> Int {
        let count = epoll_wait(descriptor.rawValue, &events, Int32(events.count), milliseconds)
        if count >= 0 { return Int(count) }
        guard errno == EINTR else { throw SystemError("epoll_wait") }
        return 0
    }
}

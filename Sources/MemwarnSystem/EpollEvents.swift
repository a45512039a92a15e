import CLinuxCalls

/// The readiness an ``EventLoop`` watches a descriptor for, and reports: epoll's event flags.
package struct EpollEvents: OptionSet, Sendable, Hashable {
    package let rawValue: UInt32

    package init(rawValue: UInt32) { self.rawValue = rawValue }

    /// Data to read, or the writer closed its end. The corresponding C constant is `EPOLLIN`.
    package static let readable = EpollEvents(rawValue: EPOLLIN.rawValue)
    /// Urgent data: a PSI trigger fired, or a kernel file changed. The corresponding C constant
    /// is `EPOLLPRI`.
    package static let priority = EpollEvents(rawValue: EPOLLPRI.rawValue)
    /// Room to write. The corresponding C constant is `EPOLLOUT`.
    package static let writable = EpollEvents(rawValue: EPOLLOUT.rawValue)
    /// An error on the descriptor (always reported; a PSI trigger whose source went away). The
    /// corresponding C constant is `EPOLLERR`.
    package static let error = EpollEvents(rawValue: EPOLLERR.rawValue)
    /// Nothing: the descriptor stays registered but reports nothing (a paused source).
    package static let none: EpollEvents = []
}

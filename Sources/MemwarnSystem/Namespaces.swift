import CLinuxCalls

/// The namespaces of this process.
package enum Namespaces {
    /// The kinds of namespace ``unshare(_:)`` makes anew.
    package struct Kinds: OptionSet, Sendable {
        package let rawValue: Int32

        package init(rawValue: Int32) { self.rawValue = rawValue }

        /// A cgroup namespace rooted at the process's cgroup (`CLONE_NEWCGROUP`; sched.h declares
        /// it only under _GNU_SOURCE).
        package static let cgroup = Kinds(rawValue: 0x0200_0000)
        /// A mount namespace, a copy of the current one (`CLONE_NEWNS`).
        package static let mount = Kinds(rawValue: 0x0002_0000)
    }

    /// Moves this process into new namespaces of the given kinds (`unshare(2)`), as a container
    /// runtime does before it starts a container's process.
    ///
    /// - Parameter kinds: the namespaces to make anew.
    /// - Throws: ``SystemError`` from `unshare` (`EPERM` without `CAP_SYS_ADMIN`).
    package static func unshare(_ kinds: Kinds) throws(SystemError) {
        try Syscall.retrying("unshare") { memwarn_unshare(kinds.rawValue) }
    }
}

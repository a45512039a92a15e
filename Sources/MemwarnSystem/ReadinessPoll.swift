#if canImport(Glibc)
import Glibc
#endif

/// Waits for any of several descriptors to become readable (`poll`): for a thread that watches
/// a handful of descriptors at once without an event loop (the node agent's batch of control
/// exchanges, its parent's kernel events).
package enum ReadinessPoll {
    /// Waits until one of `descriptors` is readable (or hung up, or in error) or `timeout` passes.
    ///
    /// - Parameters:
    ///   - descriptors: raw descriptors, borrowed for the call.
    ///   - timeout: how long at most (rounded up to a millisecond).
    /// - Returns: the indices of `descriptors` that are ready, empty on a timeout or an interruption.
    /// - Throws: ``SystemError`` from `poll`.
    package static func readable(_ descriptors: [Int32], timeout: Duration) throws(SystemError) -> [Int] {
        guard !descriptors.isEmpty else { return [] }
        var entries = descriptors.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
        let ready = poll(&entries, nfds_t(entries.count), Int32(clamping: max(0, timeout.roundedUpMilliseconds)))
        if ready < 0 {
            guard errno == EINTR else { throw SystemError("poll") }
            return []
        }
        return entries.indices.filter { entries[$0].revents != 0 }
    }
}

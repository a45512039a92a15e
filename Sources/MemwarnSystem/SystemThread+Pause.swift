#if canImport(Glibc)
import Glibc
#endif

extension SystemThread {
    /// Blocks the calling thread for `duration` (`nanosleep`; after a signal handler ran, the
    /// rest of the time is slept). Only for a thread of its own (``start(name:_:)``) or a
    /// command's short waits: a task sleeps with `Task.sleep`.
    ///
    /// - Parameter duration: how long; zero or less returns at once.
    package static func sleep(for duration: Duration) {
        guard duration > .zero else { return }
        let (seconds, attoseconds) = duration.components
        var request = timespec(tv_sec: Int(seconds), tv_nsec: Int(attoseconds / 1_000_000_000))
        var remaining = timespec()
        while nanosleep(&request, &remaining) != 0 && errno == EINTR {
            request = remaining
        }
    }

    /// Lets another thread run on this processor before the calling thread goes on
    /// (`sched_yield`): for a short spin that waits for another thread.
    @usableFromInline
    package static func yield() {
        sched_yield()
    }
}

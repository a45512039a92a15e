import CLinuxCalls
import Dispatch

#if canImport(Glibc)
import Glibc
#endif

/// Reserves libdispatch's file descriptors at start, before anything can run out of them.
///
/// libdispatch makes an `epoll` descriptor and an `eventfd` when it first needs its manager, and
/// a `timerfd` for each clock the first time a timer on that clock is armed — Swift's suspending
/// clock, its continuous clock (`Task.sleep(for:)`), the wall clock. It traps (SIGILL) or hangs
/// when it cannot make one. In a run whose descriptors are running out (a small `ulimit -n`,
/// descriptors inherited from a parent, a connection flood) that would take `memwarn` or the demo
/// down where the code that ran out should have said so. So their entry points first check that
/// the descriptors can be had (``checkAvailable()``: an error in words, not a trap), then reserve
/// them (``reserve()``): arming one timer on each clock while descriptors are free makes
/// libdispatch open its five descriptors now, held for the process's life, as they would be
/// anyway.
package enum DispatchDescriptors {
    /// The descriptors that must be free at start: libdispatch's five (above), and three for
    /// the first thing that fails afterwards to be reported by the code that ran out.
    package static let descriptorsNeeded = 8

    /// Too few descriptors free to start.
    package struct DescriptorShortage: Error, Sendable, CustomStringConvertible {
        /// How many could be opened.
        package var free: Int
        /// The soft limit (`ulimit -n`), when it can be read.
        package var limit: UInt64?

        package var description: String {
            let below = limit.map { " below the limit of \($0) (ulimit -n)" } ?? ""
            return "too few file descriptors to start: \(free) can be opened\(below), "
                + "\(DispatchDescriptors.descriptorsNeeded) are needed: \(String(cString: strerror(EMFILE)))"
        }
    }

    /// Opens ``descriptorsNeeded`` descriptors (of `/dev/null`) and closes them again. Call it
    /// first, before anything uses libdispatch.
    ///
    /// - Throws: ``DescriptorShortage`` when fewer can be opened.
    package static func checkAvailable() throws(DescriptorShortage) {
        var opened: [Int32] = []
        defer { for descriptor in opened { Glibc.close(descriptor) } }
        let first = Glibc.open("/dev/null", O_RDONLY | O_CLOEXEC)
        if first >= 0 {
            opened.append(first)
            while opened.count < descriptorsNeeded {
                let copy = fcntl(first, F_DUPFD_CLOEXEC, 0)
                guard copy >= 0 else { break }
                opened.append(copy)
            }
        }
        guard opened.count < descriptorsNeeded else { return }
        throw DescriptorShortage(free: opened.count, limit: ResourceLimits.openDescriptors)
    }

    /// Reserves libdispatch's five descriptors: arms and waits for one timer on each clock (about
    /// a millisecond each), so that libdispatch opens its manager's and each clock's descriptors
    /// now and keeps them. Call it after ``checkAvailable()``.
    package static func reserve() async {
        // A deadline that has already passed is run at once, with no timer: 1 ms is not.
        try? await SuspendingClock().sleep(for: .milliseconds(1))
        try? await ContinuousClock().sleep(for: .milliseconds(1))
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            DispatchQueue.global().asyncAfter(wallDeadline: .now() + .milliseconds(1)) { done.resume() }
        }
    }
}

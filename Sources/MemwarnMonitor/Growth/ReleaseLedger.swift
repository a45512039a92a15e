import MemwarnSystem

/// What memwarn's automatic releases have given back so far, so the growth estimate can add it
/// to usage (a release is not a fall), and whether one is under way (a reading taken meanwhile
/// is half before, half after: the estimate skips it).
final class ReleaseLedger: Sendable {
    struct Entry: Sendable, Hashable {
        /// Bytes usage fell by across every finished release, measured by the kernel.
        var releasedBytes: UInt64 = 0
        /// Finished releases.
        var releases = 0
        /// Whether a release is under way.
        var inFlight = false
    }

    private let state = Locked(Entry())

    /// The ledger now.
    var current: Entry { state.withLock { $0 } }

    /// A release starts.
    func begin() { state.withLock { $0.inFlight = true } }

    /// A release ended; usage fell by `droppedBytes` across it.
    func end(droppedBytes: UInt64) {
        state.withLock {
            $0.inFlight = false
            $0.releasedBytes &+= droppedBytes
            $0.releases += 1
        }
    }
}

import MemwarnSystem

/// What memwarn's automatic releases (or a node agent's asks) have given back so far, so the
/// growth estimate can add it to usage (a release is not a fall), and whether one is under way
/// (a reading taken meanwhile is half before, half after: the estimate skips it).
package final class ReleaseLedger: Sendable {
    package struct Entry: Sendable, Hashable {
        /// Bytes usage fell by across every finished release, measured by the kernel.
        var releasedBytes: UInt64 = 0
        /// Finished releases.
        var releases = 0
        /// Releases under way (a node agent's asks may overlap).
        fileprivate var underWay = 0
        /// Whether a release is under way.
        var inFlight: Bool { underWay > 0 }
    }

    private let state = Locked(Entry())

    package init() {}

    /// The ledger now.
    var current: Entry { state.withLock { $0 } }

    /// A release starts.
    package func begin() { state.withLock { $0.underWay += 1 } }

    /// A release ended; usage fell by `droppedBytes` across it.
    package func end(droppedBytes: UInt64) {
        state.withLock {
            $0.underWay = max(0, $0.underWay - 1)
            $0.releasedBytes &+= droppedBytes
            $0.releases += 1
        }
    }
}

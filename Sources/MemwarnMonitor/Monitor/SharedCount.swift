import Synchronization

/// A count kept on one thread and read on any: one relaxed add an event, no lock.
final class SharedCount: Sendable {
    private let count = Atomic<Int>(0)

    init() {}

    /// The events so far.
    var value: Int { count.load(ordering: .relaxed) }

    /// One more.
    func add() { count.add(1, ordering: .relaxed) }
}

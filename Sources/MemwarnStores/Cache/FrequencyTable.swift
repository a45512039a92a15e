public import Synchronization

/// How often each slot's entry was read since it was last looked at by the eviction: 0 to 3,
/// one atomic byte a slot, so that a hit — under the cache's shared lock, on any thread — only
/// raises a byte, and one that is already at 3 is not written at all (hot entries' bytes stay
/// read-only, and their cache lines are not bounced between cores).
///
/// Grown and read for eviction only by a writer (the cache's lock held alone).
@usableFromInline
final class FrequencyTable: @unchecked Sendable {
    // @unchecked: `counts` and `capacity` change only under the cache's lock held alone (no
    // reader is in); readers touch only the atomics.
    @exclusivity(unchecked) @usableFromInline var counts: UnsafeMutablePointer<Atomic<UInt8>>
    @exclusivity(unchecked) @usableFromInline var capacity: Int

    /// The highest count: three reads or more.
    @usableFromInline static let maximum: UInt8 = 3

    @usableFromInline
    init() {
        capacity = 64
        counts = .allocate(capacity: capacity)
        for slot in 0..<capacity { (counts + slot).initialize(to: Atomic(0)) }
    }

    deinit {
        counts.deinitialize(count: capacity)
        counts.deallocate()
    }

    /// Makes room for slots up to `count` (writer only).
    @inlinable
    func reserve(_ count: Int) {
        guard count > capacity else { return }
        grow(to: count)
    }

    @usableFromInline
    func grow(to count: Int) {
        let newCapacity = max(count, capacity * 2)
        let grown = UnsafeMutablePointer<Atomic<UInt8>>.allocate(capacity: newCapacity)
        for slot in 0..<capacity { (grown + slot).initialize(to: Atomic(counts[slot].load(ordering: .relaxed))) }
        for slot in capacity..<newCapacity { (grown + slot).initialize(to: Atomic(0)) }
        counts.deinitialize(count: capacity)
        counts.deallocate()
        counts = grown
        capacity = newCapacity
    }

    /// Counts a read of the slot's entry (any thread, under the cache's shared lock).
    @inlinable
    func recordRead(_ slot: Int32) {
        let count = counts[Int(slot)].load(ordering: .relaxed)
        if count < Self.maximum { counts[Int(slot)].store(count + 1, ordering: .relaxed) }
    }

    /// The slot's count.
    @inlinable
    subscript(slot: Int32) -> UInt8 {
        get { counts[Int(slot)].load(ordering: .relaxed) }
        set { counts[Int(slot)].store(newValue, ordering: .relaxed) }
    }
}

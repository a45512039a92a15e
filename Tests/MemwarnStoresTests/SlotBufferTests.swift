import Testing

@testable import MemwarnStores

/// The cache's slot buffer grows with `realloc` when its elements move bit for bit, and element
/// by element otherwise. Both paths must keep every element intact across many growths, and
/// destroy each exactly once.
@Suite("SlotBuffer keeps its elements across growth")
struct SlotBufferTests {
    /// Counts its own deinitializations (the value-layout tests' tally).
    typealias Tracked = DiscardableCacheValueLayoutTests.Tracked
    typealias Tally = DiscardableCacheValueLayoutTests.Tally

    /// A struct with a weak reference, which the compiler does not let move bit for bit, and a
    /// strong one, whose destruction the tally counts.
    struct WeakHolder {
        weak var target: Tracked?
        var owned: Tracked
    }

    @Test func elementsThatMoveBitForBitSurviveGrowthAndAreDestroyedOnce() {
        #expect(SlotBuffer<Tracked?>.growsInPlace)
        let tally = Tally()
        do {
            var buffer = SlotBuffer<Tracked?>()
            for key in 0..<5_000 { buffer.append(Tracked(key, tally)) }
            #expect(buffer.count == 5_000)
            #expect(buffer.capacity >= 5_000)
            #expect(buffer.indices.allSatisfy { buffer[$0]?.key == $0 })
            buffer[7] = nil
            #expect(tally.count == 1)
            #expect(buffer.popLast()??.key == 4_999)
            #expect(tally.count == 2)
        }
        #expect(tally.count == 5_000)
    }

    @Test func elementsThatCannotMoveBitForBitAreMovedOneByOne() {
        #expect(!SlotBuffer<WeakHolder>.growsInPlace)
        let targets = (0..<1_000).map { Tracked($0, Tally()) }
        let owned = Tally()
        var buffer = SlotBuffer<WeakHolder>()
        for target in targets { buffer.append(WeakHolder(target: target, owned: Tracked(target.key, owned))) }
        // After seven allocations (six moves) each weak reference still finds its object, and
        // no element was destroyed on the way.
        #expect(buffer.indices.allSatisfy { buffer[$0].target === targets[$0] && buffer[$0].owned.key == $0 })
        #expect(owned.count == 0)
        buffer.removeAll()
        #expect(owned.count == 1_000)
        #expect(buffer.count == 0 && buffer.capacity == 0)
        buffer.append(WeakHolder(target: targets[3], owned: Tracked(3, owned)))
        #expect(buffer[0].target === targets[3])
    }

    @Test func removeAllDestroysEveryElementAndTheBufferCanGrowAgain() {
        let tally = Tally()
        var buffer = SlotBuffer<Tracked?>()
        for key in 0..<100 { buffer.append(Tracked(key, tally)) }
        buffer.removeAll()
        #expect(tally.count == 100)
        #expect(buffer.popLast() == nil)
        for key in 0..<40 { buffer.append(Tracked(key, tally)) }
        #expect(buffer.withUnsafeBufferPointer { $0.compactMap { $0?.key } } == Array(0..<40))
        buffer.withUnsafeMutableBufferPointer { elements in
            for slot in elements.indices { elements[slot] = nil }
        }
        #expect(tally.count == 140)
    }
}

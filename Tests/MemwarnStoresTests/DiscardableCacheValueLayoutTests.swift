import Testing

@testable import MemwarnRelease
@testable import MemwarnStores

/// A release frees values through a fast path that reads each value's first word to prefetch
/// its heap object (see `CacheStorage+Prefetch.swift`). These tests hold values of every
/// layout that path may meet and check that each released value is destroyed exactly once,
/// and that the values kept are intact.
@Suite("DiscardableCache frees values of any layout")
struct DiscardableCacheValueLayoutTests {
    /// Counts its own deinitializations in a shared tally.
    final class Tracked {
        let tally: Tally
        let key: Int
        init(_ key: Int, _ tally: Tally) {
            self.key = key
            self.tally = tally
        }
        deinit { tally.count += 1 }
    }

    final class Tally { var count = 0 }

    enum Payload {
        case none
        case tracked(Tracked)
        case pair(String, Tracked)
    }

    struct Record {
        var label: String
        var tracked: Tracked
        var number: Int
    }

    static let entries = 100

    /// Fills a cache through a coordinator (so release runs as the coordinator calls it),
    /// releases `target` bytes (cost 10 per entry), and returns how many values were
    /// destroyed and the keys still readable through `key(of:)`.
    static func releaseAndCount<Value>(target: Int, make: (Int, Tally) -> Value, key: (Value) -> Int?) -> (destroyed: Int, kept: [Int], count: Int) {
        let tally = Tally()
        let coordinator = ReleaseCoordinator(trimsHeap: false)
        let cache = DiscardableCache<Int, Value>(coordinator: coordinator)
        for index in 0..<entries { cache.setObject(make(index, tally), forKey: index, cost: 10 + index % 3) }
        _ = coordinator.release(level: .critical, targetBytes: target)
        let kept = (0..<entries).compactMap { cache.object(forKey: $0).flatMap(key) }
        return (tally.count, kept, cache.count)
    }

    static func check<Value>(_ make: @escaping (Int, Tally) -> Value, key: @escaping (Value) -> Int?) {
        let everything = releaseAndCount(target: .max, make: make, key: key)
        #expect(everything.destroyed == entries)
        #expect(everything.kept.isEmpty)
        #expect(everything.count == 0)

        let part = releaseAndCount(target: 300, make: make, key: key)
        #expect(part.destroyed > 0 && part.destroyed < entries)
        #expect(part.destroyed + part.count == entries)
        #expect(part.kept.count == part.count)  // every kept value still reads back whole
    }

    @Test func classReferences() {
        Self.check({ Tracked($0, $1) }, key: { $0.key })
    }

    @Test func arraysOfReferences() {
        Self.check({ [Tracked($0, $1)] }, key: { $0.first?.key })
    }

    @Test func structsWhoseFirstWordIsNotAPointer() {
        Self.check(
            { Record(label: "entry \($0) with a label too long to be stored inline", tracked: Tracked($0, $1), number: $0) },
            key: { $0.number == $0.tracked.key ? $0.number : nil })
    }

    @Test func enumsWithPayloads() {
        Self.check(
            { index, tally -> Payload in index.isMultiple(of: 2) ? .tracked(Tracked(index, tally)) : .pair("odd \(index)", Tracked(index, tally)) },
            key: { payload in
                switch payload {
                case .none: nil
                case .tracked(let tracked): tracked.key
                case .pair(let label, let tracked): label == "odd \(tracked.key)" ? tracked.key : nil
                }
            })
    }

    @Test func existentials() {
        Self.check({ Tracked($0, $1) as Any }, key: { ($0 as? Tracked)?.key })
    }

    @Test func optionals() {
        Self.check({ Optional(Tracked($0, $1)) }, key: { $0?.key })
    }

    @Test func valuesWithNoHeapObjectAreReleasedToo() {
        let coordinator = ReleaseCoordinator(trimsHeap: false)
        let small = DiscardableCache<Int, UInt8>(coordinator: coordinator)
        let plain = DiscardableCache<Int, (Int, Int)>(coordinator: coordinator)
        for index in 0..<Self.entries {
            small.setObject(UInt8(index), forKey: index, cost: 1)
            plain.setObject((index, -index), forKey: index, cost: 1)
        }
        let report = coordinator.release(level: .critical, targetBytes: .max)
        #expect(report.freedBytes == 2 * Self.entries)
        #expect(small.count == 0 && plain.count == 0)
    }
}

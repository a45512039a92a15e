import MemwarnRelease
import MemwarnTestFixtures
import Testing

@testable import MemwarnStores

/// `PurgeableData` follows `NSPurgeableData`: created in use, discardable only when no
/// access is outstanding, and gone for good once discarded.
@Suite("PurgeableData behaves like NSPurgeableData")
struct PurgeableDataTests {
    @Test func newDataIsInUseSoItCannotBeDiscardedYet() {
        let data = PurgeableData(bytes: [1, 2, 3])
        data.discardContentIfPossible()
        #expect(!data.isContentDiscarded())
        #expect(data.length == 3)
        #expect(data.bytes == [1, 2, 3])
    }

    @Test func endingTheFirstAccessLetsTheContentBeDiscarded() {
        let data = PurgeableData(bytes: [1, 2, 3])
        data.endContentAccess()
        #expect(!data.isContentDiscarded())
        data.discardContentIfPossible()
        #expect(data.isContentDiscarded())
        #expect(data.length == 0)
        #expect(data.bytes == nil)
    }

    @Test func accessesNestAndTheContentStaysUntilTheLastOneEnds() {
        let data = PurgeableData(bytes: [9])
        #expect(data.beginContentAccess())
        #expect(data.beginContentAccess())
        data.endContentAccess()
        data.endContentAccess()
        data.discardContentIfPossible()
        #expect(!data.isContentDiscarded())  // the access from init is still open
        data.endContentAccess()
        data.discardContentIfPossible()
        #expect(data.isContentDiscarded())
    }

    @Test func beginContentAccessFailsOnceTheContentIsDiscarded() {
        let data = CacheFixtures.discardedData()
        #expect(!data.beginContentAccess())
        #expect(!data.beginContentAccess())
        // A failed begin does not take an access, so discarding stays possible and harmless.
        data.discardContentIfPossible()
        #expect(data.isContentDiscarded())
    }

    @Test func beginContentAccessSucceedsWhileTheContentIsPresent() {
        let data = CacheFixtures.idleData(count: 2, byte: 5)
        #expect(data.beginContentAccess())
        data.discardContentIfPossible()
        #expect(!data.isContentDiscarded())
        #expect(data.withBytes { $0.reduce(0, +) } == 10)
        data.endContentAccess()
    }

    @Test func emptyDataIsNotDiscardedUntilItIsDiscarded() {
        let data = PurgeableData(bytes: [])
        #expect(data.length == 0)
        #expect(!data.isContentDiscarded())
        #expect(data.withBytes { $0.count } == 0)
        data.endContentAccess()
        data.discardContentIfPossible()
        #expect(data.isContentDiscarded())
        #expect(data.withBytes { $0.count } == nil)
    }

    @Test func repeatingAByteFillsEveryByteAndTheDataIsInUse() {
        let data = PurgeableData(repeating: 7, count: 100_000)  // a mapping of its own (over 64 KiB)
        #expect(data.bytes == [UInt8](repeating: 7, count: 100_000))
        data.discardContentIfPossible()
        #expect(!data.isContentDiscarded())
    }

    @Test func withBytesPassesOnWhatTheBodyThrows() {
        struct Failure: Error {}
        let data = PurgeableData(bytes: [1])
        #expect(throws: Failure.self) { try data.withBytes { _ in throw Failure() } }
    }

    @Test func endingAnAccessThatWasNeverBegunTraps() async {
        await #expect(processExitsWith: .failure) {
            let data = PurgeableData(bytes: [1])
            data.endContentAccess()
            data.endContentAccess()
        }
    }
}

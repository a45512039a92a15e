import MemwarnSystem
import MemwarnTestKit
import Synchronization
import Testing

@testable import MemwarnRelease
@testable import MemwarnStores

/// A `ResourcePool` of a driver that connects and closes asynchronously (as postgres-nio
/// does): its opens and closes are awaited, never blocking a thread.
@Suite
struct ResourcePoolAsyncTests {
    /// A stand-in for an asynchronous driver: a connect or close waits for its gate, suspended
    /// (never blocking its thread), and says when it begins.
    final class Driver: Sendable {
        let connecting = AsyncCondition(0)
        let connected = Atomic(0)
        let closed = Atomic(0)
        let connectGate = AsyncCondition<Bool>()
        let closeGate = AsyncCondition<Bool>()
        let closeFails: Bool

        init(closeFails: Bool = false) { self.closeFails = closeFails }

        struct Refused: Error {}

        @Sendable func connect() async throws -> Int {
            connecting.withLock { $0 += 1 }
            guard await connectGate.wait(within: .seconds(30)) else { throw Refused() }
            return connected.add(1, ordering: .relaxed).newValue
        }

        @Sendable func close(_: Int) async throws {
            guard await closeGate.wait(within: .seconds(30)) else { throw Refused() }
            closed.add(1, ordering: .relaxed)
            if closeFails { throw Refused() }
        }

        func pool(maximumCount: Int, retention: ResourceRetention = .default) -> ResourcePool<Int> {
            ResourcePool(
                name: "pg", bytesPerHandle: 256 << 10, maximumCount: maximumCount, retention: retention, coordinator: nil,
                open: { try await self.connect() }, close: { try await self.close($0) })
        }
    }

    /// 16 borrowers at once on a machine whose task pool has a thread a core: all 16 connects
    /// are under way together, which cannot happen if a connect held a thread.
    @Test func sixteenConnectsWaitTogetherWithoutHoldingAThread() async throws {
        let driver = Driver()
        let pool = driver.pool(maximumCount: 16)
        try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<16 { group.addTask { try await pool.withResource { $0 } } }
            #expect(await driver.connecting.wait(within: .seconds(30)) { $0 == 16 }, "connects under way: \(driver.connecting.withLock { $0 })")
            driver.connectGate.open()
            var seen: Set<Int> = []
            for try await id in group { seen.insert(id) }
            #expect(seen == Set(1...16))
        }
        #expect(pool.openCount == 16 && pool.idleCount == 16)
        driver.closeGate.open()
        #expect(await pool.closeIdleAndWait().closed == 16)
        #expect(driver.closed.load(ordering: .relaxed) == 16)
    }

    /// A release, which cannot wait, takes the handles out at once and starts their closes; they
    /// hold their places under the maximum until they end, and `closeIdleAndWait` waits for them.
    @Test func aReleaseStartsClosesThatHoldTheirPlacesUntilTheyEnd() async throws {
        let driver = Driver()
        driver.connectGate.open()
        let pool = driver.pool(maximumCount: 2, retention: .none)
        try await pool.withResource { _ in try await pool.withResource { _ in } }
        let freed = pool.release(ReleaseRequest(level: .critical, tier: .sharedResources, targetBytes: .max))
        #expect(freed == 2 * (256 << 10) && pool.openCount == 0 && pool.closingCount == 2)
        #expect(driver.closed.load(ordering: .relaxed) == 0, "started, not ended")
        let borrower = Task { try await pool.withResource { $0 } }
        while pool.waitingCount == 0 { try await Task.sleep(for: .milliseconds(1)) }  // the pool raises no event when a borrower queues
        let waited = Task { await pool.closeIdleAndWait() }
        driver.closeGate.open()
        _ = await waited.value
        #expect(driver.closed.load(ordering: .relaxed) == 2 && pool.closingCount == 0, "closeIdleAndWait returned after the closes ended")
        #expect(try await borrower.value == 3, "the borrower opened once a close gave its place back")
        _ = await pool.closeIdleAndWait()
    }

    @Test func failedAsynchronousClosesAreKeptUntilTaken() async throws {
        let driver = Driver(closeFails: true)
        driver.connectGate.open()
        driver.closeGate.open()
        let pool = driver.pool(maximumCount: 2, retention: .none)
        try await pool.withResource { _ in }
        #expect(pool.closeIdle().closed == 1)
        let result = await pool.closeIdleAndWait()
        #expect(result.closed == 0 && result.succeeded, "nothing left idle; the close under way ended first")
        let kept = pool.takeCloseErrors()
        #expect(kept.count == 1 && kept.first?.pool == "pg" && kept.first?.error is Driver.Refused)
    }

    /// A connect that never completes (a database that accepts and never answers): the pool sets
    /// no timeout of its own, and a borrower that gives up cancels its connect, whose place under
    /// the maximum goes to the next borrower.
    @Test func aBorrowerCancelledWhileItsConnectHangsGivesItsPlaceBack() async throws {
        let connects = AsyncCondition(0)
        let pool = ResourcePool<Int>(
            name: "pg", bytesPerHandle: 256 << 10, maximumCount: 1, retention: .none, coordinator: nil,
            open: {
                if connects.withLock({
                    $0 += 1
                    return $0
                }) == 1 {
                    try await waitForCancellation(within: .seconds(30))
                }
                return 7
            },
            close: { _ in })
        let hung = Task { try await pool.withResource { $0 } }
        #expect(await connects.wait(within: .seconds(30)) { $0 == 1 })
        hung.cancel()
        await #expect(throws: CancellationError.self) { try await hung.value }
        #expect(try await pool.withResource { $0 } == 7, "the cancelled connect gave its place back")
        #expect(pool.openCount == 1 && pool.waitingCount == 0)
    }
}

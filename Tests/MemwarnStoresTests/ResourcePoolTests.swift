import MemwarnSystem
import Synchronization
import Testing

@testable import MemwarnRelease
@testable import MemwarnStores

#if canImport(Glibc)
import Glibc
#endif

/// A failed system call, as the tests' `close` closures report it.
struct SystemCallError: Error, Equatable {
    var call: String
    var errno: Int32
}

/// A pool of real file descriptors on `/dev/null`, counting opens and successful closes.
final class DescriptorPoolFixture: Sendable {
    static let bytesPerHandle = 4096
    let opens = Atomic(0)
    let closes = Atomic(0)
    let reported = Locked<[ResourceCloseError]>([])
    let lowestDescriptor: Int32

    /// Where a fixture's descriptors are numbered: high, so that ordinary opens elsewhere in
    /// the process (which take the lowest free number) never reach them.
    enum Band {
        /// For pools whose descriptors stay theirs until the pool closes them.
        case shared
        /// For a test that closes a descriptor behind the pool's back: a band of its own, so
        /// that no pool in another suite running alongside is handed the freed number and has
        /// it closed by this test's pool.
        case closedBehindTheBack
    }

    /// The top of the numbers used (4000, or just under the soft limit, which may be as low as
    /// 256); the shared band starts at half of it.
    static let topDescriptor: Int32 = {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 192 }
        return Int32(min(4000, max(64, Int(clamping: limit.rlim_cur) - 64)))
    }()

    init(band: Band = .shared) {
        lowestDescriptor = band == .shared ? Self.topDescriptor / 2 : Self.topDescriptor
    }

    /// Opens `/dev/null`, moved to a number ≥ ``lowestDescriptor``.
    @Sendable func open() throws -> Int32 {
        let low = Glibc.open("/dev/null", O_RDWR | O_CLOEXEC)
        guard low >= 0 else { throw SystemCallError(call: "open", errno: errno) }
        defer { Glibc.close(low) }
        let fd = fcntl(low, F_DUPFD_CLOEXEC, lowestDescriptor)
        guard fd >= 0 else { throw SystemCallError(call: "fcntl", errno: errno) }
        opens.add(1, ordering: .relaxed)
        return fd
    }

    @Sendable func close(_ fd: Int32) throws {
        guard Glibc.close(fd) == 0 else { throw SystemCallError(call: "close", errno: errno) }
        closes.add(1, ordering: .relaxed)
    }

    /// A pool of these descriptors. The release mechanics tested with it (order, errors, the
    /// maximum) are the retention's business only in ResourcePoolRetentionTests, which give the
    /// default retention a manual clock; here a release may close any idle handle at once.
    func pool(
        maximumCount: Int = 4, coordinator: ReleaseCoordinator? = nil, reportsErrors: Bool = true, retention: ResourceRetention = .none
    ) -> ResourcePool<Int32> {
        let report: @Sendable (ResourceCloseError) -> Void = { error in self.reported.withLock { $0.append(error) } }
        return ResourcePool(
            name: "devnull", bytesPerHandle: Self.bytesPerHandle, maximumCount: maximumCount, retention: retention, coordinator: coordinator,
            onCloseError: reportsErrors ? report : nil,
            open: { try self.open() }, close: { try self.close($0) })
    }

    var openCount: Int { opens.load(ordering: .relaxed) }
    var closeCount: Int { closes.load(ordering: .relaxed) }
}

/// Writes one byte: proof that a descriptor is open.
func writesOneByte(_ fd: Int32) -> Bool {
    var byte: UInt8 = 0x2A
    return Glibc.write(fd, &byte, 1) == 1
}

/// Serialized: the close-failure tests close a descriptor behind the pool's back, and another
/// test of this suite opening at the same time in their band would get that number and have it
/// closed by the pool. (Other suites use the shared band; see `DescriptorPoolFixture.Band`.)
@Suite(.serialized)
struct ResourcePoolTests {
    static func request(_ bytes: Int) -> ReleaseRequest {
        ReleaseRequest(level: .critical, tier: .sharedResources, targetBytes: bytes)
    }

    @Test func idleHandlesAreClosedOnReleaseUntilTheTargetIsMet() async throws {
        let fixture = DescriptorPoolFixture()
        let pool = fixture.pool()
        var seen: Set<Int32> = []
        try await pool.withResource { a in
            try await pool.withResource { b in
                try await pool.withResource { c in
                    seen = [a, b, c]
                    #expect([a, b, c].allSatisfy(writesOneByte))
                }
            }
        }
        #expect(seen.count == 3 && fixture.openCount == 3)
        #expect(pool.openCount == 3 && pool.idleCount == 3)
        #expect(pool.footprintBytes == 3 * DescriptorPoolFixture.bytesPerHandle)

        #expect(pool.release(Self.request(DescriptorPoolFixture.bytesPerHandle + 1)) == 2 * DescriptorPoolFixture.bytesPerHandle)
        #expect(fixture.closeCount == 2)
        #expect(pool.openCount == 1)

        let rest = pool.closeIdle()
        #expect(rest.closed == 1 && rest.succeeded && rest.inUse == 0)
        #expect(fixture.closeCount == 3 && pool.footprintBytes == 0)
        #expect(pool.release(Self.request(.max)) == 0)
    }

    @Test func aHandleInUseSurvivesReleaseAndIsClosedLaterOnlyWhenIdle() async throws {
        let fixture = DescriptorPoolFixture()
        let pool = fixture.pool()
        try await pool.withResource { fd in
            // Released from another thread, as the monitor's thread would.
            let freed = await Task.detached { pool.release(Self.request(.max)) }.value
            #expect(freed == 0)
            let result = pool.closeIdle()
            #expect(result.closed == 0 && result.inUse == 1)
            #expect(fixture.closeCount == 0)
            #expect(writesOneByte(fd))
            #expect(pool.inUseBytes == DescriptorPoolFixture.bytesPerHandle && pool.footprintBytes == DescriptorPoolFixture.bytesPerHandle)
        }
        #expect(pool.idleCount == 1 && fixture.closeCount == 0)
        #expect(pool.inUseBytes == 0, "back in the pool: idle, not in use")
        #expect(pool.release(Self.request(1)) == DescriptorPoolFixture.bytesPerHandle)
        #expect(fixture.closeCount == 1 && pool.openCount == 0)
    }

    @Test func handlesAreReusedAndReopenedLazilyAfterClosing() async throws {
        let fixture = DescriptorPoolFixture()
        let pool = fixture.pool()
        #expect(fixture.openCount == 0 && pool.footprintBytes == 0)
        var descriptors: Set<Int32> = []
        for _ in 0..<5 {
            try await pool.withResource { fd in _ = descriptors.insert(fd) }
        }
        #expect(fixture.openCount == 1 && descriptors.count == 1)

        pool.closeIdle()
        #expect(fixture.openCount == 1 && fixture.closeCount == 1)
        let wrote = try await pool.withResource { writesOneByte($0) }
        #expect(wrote)
        #expect(fixture.openCount == 2 && pool.openCount == 1)
        pool.closeIdle()
    }

    @Test func aCloseFailingWithEBADFIsReportedWithTheError() async throws {
        let fixture = DescriptorPoolFixture(band: .closedBehindTheBack)
        let pool = fixture.pool()
        try await pool.withResource { fd in
            #expect(Glibc.close(fd) == 0)  // closed behind the pool's back
        }
        let result = pool.closeIdle()
        #expect(result.closed == 1 && !result.succeeded)
        let failure = try #require(result.failures.first)
        #expect(failure.pool == "devnull")
        #expect(failure.error as? SystemCallError == SystemCallError(call: "close", errno: EBADF))
        #expect(fixture.reported.withLock { $0.count } == 1)
        #expect(pool.openCount == 0)  // dropped all the same
    }

    @Test func closeFailuresDuringReleaseAreKeptWhenNoCallbackIsSet() async throws {
        let fixture = DescriptorPoolFixture(band: .closedBehindTheBack)
        let pool = fixture.pool(reportsErrors: false)
        try await pool.withResource { fd in #expect(Glibc.close(fd) == 0) }
        #expect(pool.release(Self.request(.max)) == DescriptorPoolFixture.bytesPerHandle)
        let kept = pool.takeCloseErrors()
        #expect(kept.count == 1)
        #expect((kept.first?.error as? SystemCallError)?.errno == EBADF)
        #expect(pool.takeCloseErrors().isEmpty)
    }

    @Test func aThrowingCloseClosureIsReportedNotSwallowed() async throws {
        struct DeviceBusy: Error {}
        let reported = Locked<[ResourceCloseError]>([])
        let pool = ResourcePool<Int>(
            name: "camera", bytesPerHandle: 1 << 20, maximumCount: 2, retention: .none, coordinator: nil,
            onCloseError: { error in reported.withLock { $0.append(error) } },
            open: { 7 }, close: { _ in throw DeviceBusy() })
        try await pool.withResource { #expect($0 == 7) }
        #expect(pool.release(Self.request(1)) == 1 << 20)
        let errors = reported.withLock { $0 }
        #expect(errors.count == 1)
        #expect(errors.first?.error is DeviceBusy)
        #expect(errors.first?.description.hasPrefix("camera: closing a handle failed") == true)
    }

    final class Borrowers: Sendable {
        let current = Atomic(0)
        let peak = Atomic(0)
    }

    @Test func theMaximumIsRespectedUnderConcurrentBorrowers() async throws {
        let fixture = DescriptorPoolFixture()
        let pool = fixture.pool(maximumCount: 3)
        let borrowers = Borrowers()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<32 {
                group.addTask {
                    try await pool.withResource { fd in
                        let now = borrowers.current.add(1, ordering: .relaxed).newValue
                        borrowers.peak.max(now, ordering: .relaxed)
                        #expect(writesOneByte(fd))
                        // Held a while so that the others try to get past the maximum: a borrower that
                        // queues raises no event (one that waits for "all asked" misses the hop
                        // between asking and queueing, and the test no longer sees a fourth let in).
                        try await Task.sleep(for: .milliseconds(2))
                        borrowers.current.subtract(1, ordering: .relaxed)
                    }
                }
            }
            try await group.waitForAll()
        }
        #expect(borrowers.peak.load(ordering: .relaxed) == 3)
        #expect(fixture.openCount == 3)
        #expect(pool.openCount == 3 && pool.idleCount == 3 && pool.waitingCount == 0)
        #expect(pool.closeIdle().closed == 3)
        #expect(fixture.closeCount == 3)
    }

    @Test func aWaitingBorrowerCanBeCancelled() async throws {
        let fixture = DescriptorPoolFixture()
        let pool = fixture.pool(maximumCount: 1)
        try await pool.withResource { _ in
            let waiter = Task { try await pool.withResource { _ in } }
            while pool.waitingCount == 0 { try await Task.sleep(for: .milliseconds(1)) }  // the pool raises no event when a borrower queues
            waiter.cancel()
            await #expect(throws: CancellationError.self) { try await waiter.value }
            #expect(pool.waitingCount == 0)
        }
        #expect(pool.openCount == 1 && fixture.openCount == 1)
        pool.closeIdle()
    }

    @Test func aFailedOpenReachesTheBorrowerAndFreesItsPlace() async throws {
        struct Refused: Error {}
        let attempts = Atomic(0)
        let pool = ResourcePool<Int>(
            name: "db", bytesPerHandle: 100, maximumCount: 1, coordinator: nil,
            open: {
                if attempts.add(1, ordering: .relaxed).newValue == 1 { throw Refused() }
                return 1
            },
            close: { _ in })
        await #expect(throws: Refused.self) { try await pool.withResource { _ in } }
        #expect(pool.openCount == 0)
        #expect(try await pool.withResource { $0 } == 1)
        #expect(pool.openCount == 1)
    }

    @Test func theCoordinatorClosesIdleHandlesOnlyAtCritical() async throws {
        let fixture = DescriptorPoolFixture()
        let coordinator = ReleaseCoordinator(trimsHeap: false)
        let pool = fixture.pool(coordinator: coordinator)
        try await pool.withResource { _ in }
        #expect(coordinator.release(level: .warning, targetBytes: .max).entries.isEmpty)
        #expect(pool.openCount == 1)
        let report = coordinator.release(level: .critical, targetBytes: 1)
        #expect(report.entries.map(\.tier) == [.sharedResources])
        #expect(report.freedBytes == DescriptorPoolFixture.bytesPerHandle)
        #expect(pool.openCount == 0 && fixture.closeCount == 1)
    }

    @Test func aDeallocatedPoolClosesItsIdleHandles() async throws {
        let fixture = DescriptorPoolFixture()
        var pool: ResourcePool<Int32>? = fixture.pool()
        try await pool!.withResource { _ in }
        #expect(fixture.closeCount == 0)
        pool = nil
        #expect(fixture.closeCount == 1)
    }
}

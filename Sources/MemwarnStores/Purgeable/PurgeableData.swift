public import Synchronization

/// Bytes the system may purge when they are not in use: Apple's `NSPurgeableData`, for Linux.
///
/// As on Apple platforms it is created *in use* (access count 1): call
/// ``endContentAccess()`` when done, and ``beginContentAccess()`` (checking its result)
/// before using the bytes again. Once discarded, the bytes are gone for good: the object
/// stays, empty, so a cache holding it can tell (``isContentDiscarded()``) and rebuild.
/// Cached without ``endContentAccess()`` it is memory in use: no release can take it, and the
/// release report (``/MemwarnRelease/ReleaseReport/entriesInUse``) and the exhausted state
/// (``/MemwarnRelease/MemoryExhaustion/holders``) name the cache that holds it.
///
/// ## Where the bytes live
///
/// Not on malloc's heap: in memwarn's purgeable arena, memory the library maps itself in
/// 2 MiB regions (huge pages where the kernel allows). Discarding content, or dropping the last
/// reference, frees the block with atomic counts (a lock only when the block was its region's
/// last: the region is then unmapped), and ``/MemwarnRelease/ReleaseCoordinator`` gives back the free pages of
/// the other regions after each release. So releasing purgeable data lowers the process's
/// resident set without `malloc_trim`, and a release of a gigabyte is mostly the kernel
/// dropping a few hundred huge pages. Blocks over 64 KiB are mapped on their own.
///
/// All methods are thread-safe. Access counting is lock-free; creating data takes the arena's
/// lock for a moment (to place the block).
public final class PurgeableData: BatchDiscardableContent, Sendable {
    /// Open accesses, or ``discarded`` once the bytes are gone.
    @usableFromInline let accesses = Atomic<Int>(1)
    @usableFromInline static let discarded = -1
    /// The block's address in the arena (0 for no bytes) and its length.
    private let address: UInt
    private let count: Int

    /// Copies `bytes`; the new object is in use.
    ///
    /// - Parameter bytes: the bytes to copy into the arena.
    public convenience init(bytes: some Collection<UInt8>) {
        self.init(count: bytes.count) { buffer in
            _ = buffer.initializeMemory(as: UInt8.self, from: bytes)
        }
    }

    /// `count` copies of `byte`; the new object is in use.
    ///
    /// - Parameters:
    ///   - byte: the value of every byte.
    ///   - count: the length in bytes.
    public convenience init(repeating byte: UInt8, count: Int) {
        self.init(count: count) { $0.initializeMemory(as: UInt8.self, repeating: byte) }
    }

    /// `count` bytes written by `initialize`, which must set every byte of the buffer it is
    /// given; the new object is in use. If `initialize` throws, nothing is kept.
    ///
    /// - Parameters:
    ///   - count: the length in bytes, 0 or more.
    ///   - initialize: writes the bytes into the buffer it is given.
    /// - Throws: what `initialize` throws.
    public init(count: Int, initializingWith initialize: (UnsafeMutableRawBufferPointer) throws -> Void) rethrows {
        precondition(count >= 0, "a negative byte count: \(count)")
        guard count > 0 else {
            address = 0
            self.count = 0
            try initialize(UnsafeMutableRawBufferPointer(start: nil, count: 0))
            return
        }
        let block = PurgeableArena.shared.allocate(byteCount: count)
        do {
            try initialize(UnsafeMutableRawBufferPointer(start: block, count: count))
        } catch {
            PurgeableArena.shared.deallocate(block, byteCount: count)
            throw error
        }
        address = UInt(bitPattern: block)
        self.count = count
    }

    deinit {
        if accesses.load(ordering: .acquiring) != Self.discarded { freeBytes() }
    }

    /// The length in bytes (0 once discarded).
    public var length: Int { isContentDiscarded() ? 0 : count }

    /// Runs `body` with the bytes, or returns `nil` when they were discarded. The bytes stay
    /// for the duration of `body` (it holds an access of its own); do not let the buffer
    /// escape.
    ///
    /// - Parameter body: reads the bytes.
    /// - Returns: what `body` returned, or `nil` when the bytes were discarded.
    /// - Throws: what `body` throws.
    public func withBytes<T>(_ body: (UnsafeRawBufferPointer) throws -> T) rethrows -> T? {
        guard beginContentAccess() else { return nil }
        defer { endContentAccess() }
        return try body(UnsafeRawBufferPointer(start: UnsafeRawPointer(bitPattern: address), count: count))
    }

    /// A copy of the bytes, or `nil` when they were discarded.
    public var bytes: [UInt8]? { withBytes { Array($0) } }

    public func beginContentAccess() -> Bool {
        var current = accesses.load(ordering: .relaxed)
        while current != Self.discarded {
            let (exchanged, original) = accesses.compareExchange(expected: current, desired: current + 1, ordering: .acquiring)
            if exchanged { return true }
            current = original
        }
        return false
    }

    public func endContentAccess() {
        let remaining = accesses.wrappingSubtract(1, ordering: .releasing).newValue
        precondition(remaining >= 0, "endContentAccess() without a matching beginContentAccess()")
    }

    public func discardContentIfPossible() {
        if accesses.compareExchange(expected: 0, desired: Self.discarded, ordering: .acquiringAndReleasing).exchanged {
            freeBytes()
        }
    }

    @inlinable
    public func isContentDiscarded() -> Bool {
        accesses.load(ordering: .acquiring) == Self.discarded
    }

    /// ``discardContentIfPossible()``, with the block counted into the batch's arena lane
    /// rather than freed alone (a cache discarding many in a row frees them page by page).
    ///
    /// - Parameter batch: the batch of the discards in progress.
    /// - Returns: whether the content is discarded now (it was not in use).
    @usableFromInline package func discardContentIfPossible(into batch: inout DiscardBatch) -> Bool {
        guard accesses.compareExchange(expected: 0, desired: Self.discarded, ordering: .acquiringAndReleasing).exchanged else {
            return isContentDiscarded()
        }
        if let block = UnsafeMutableRawPointer(bitPattern: address) {
            batch.withLane({ PurgeableArena.DeallocationLane(PurgeableArena.shared) }, { $0.add(block, byteCount: count) })
        }
        return true
    }

    /// ``discardContentIfPossible(into:)`` on the `PurgeableData` at `object`, which the caller
    /// keeps alive (a cache's entry), with no generic hop and no reference counting.
    ///
    /// - Parameters:
    ///   - object: the object's address (`Unmanaged.toOpaque()`).
    ///   - batch: the batch of the discards in progress.
    /// - Returns: whether the content is discarded now.
    @usableFromInline package static func discardContent(at object: UnsafeMutableRawPointer, into batch: inout DiscardBatch) -> Bool {
        Unmanaged<PurgeableData>.fromOpaque(object)._withUnsafeGuaranteedRef { $0.discardContentIfPossible(into: &batch) }
    }

    private func freeBytes() {
        guard let block = UnsafeMutableRawPointer(bitPattern: address) else { return }
        PurgeableArena.shared.deallocate(block, byteCount: count)
    }
}

public import MemwarnRelease
import MemwarnSystem

/// A bounded pool of shared-resource handles — connections, file descriptors, devices — whose
/// idle handles are closed when memory is tight or the owner goes to the background, and
/// reopened lazily: tier ``/MemwarnRelease/ReleaseTier/sharedResources`` (asked at `.critical` only).
///
/// This is iOS's "close database connections and release shared hardware" for Linux
/// services. ``withResource(isolation:_:)`` lends a handle, reusing an idle one or opening a
/// new one; at most ``maximumCount`` handles are open at once (closes under way included) and
/// further borrowers wait, first come first served. A handle in use is never closed under its
/// user.
///
/// **Asynchronous drivers.** A driver that connects asynchronously (postgres-nio, an HTTP
/// client) gives `open` and `close` as `async` closures: the pool awaits them and never blocks
/// a thread. A memory release, which cannot wait, takes the handles it closes out of the pool
/// at once and starts their closes; ``closeIdleAndWait()`` closes and waits for them all (for a
/// shutdown).
///
/// **No thrashing.** A release closes only handles that have been idle a while and leaves some
/// open (``ResourceRetention``, ``ResourceRetention/default``): a connection closed at a
/// critical release and reopened by the next request costs a reconnect and frees little,
/// because most of its memory is in the server's process. When closed handles come back soon
/// after a release, the pool waits longer before the next release may close them.
/// ``closeIdle()`` (going to the background) closes every idle handle.
///
/// **What a release reports** is the handles it closed (or started closing) × ``bytesPerHandle``:
/// the memory they hold in this process, never more. Size `bytesPerHandle` as what one open
/// handle costs this process — the driver's buffers, its TLS state, its per-connection caches —
/// not what it costs the server: measure the service's resident memory (`/proc/self/statm`, or
/// `memory.current` of its cgroup) before and after opening, say, 16 handles, and divide.
///
/// Close failures are never swallowed: every one goes to `onCloseError` when it is set;
/// ``closeIdle()`` and ``closeIdleAndWait()`` also return their own; those of ``release(_:)``
/// and of closes started without waiting are kept, when there is no `onCloseError`, until
/// ``takeCloseErrors()``.
///
/// ```swift
/// let pool = ResourcePool<Int32>(name: "devnull", bytesPerHandle: 4096, maximumCount: 8,
///                                open: { try openDevNull() }, close: { try closeChecked($0) })
/// let n = try await pool.withResource { fd in write(fd, buffer, count) }
/// pool.closeIdle()   // going to the background
/// ```
///
/// `Resource` need not be `Sendable`: the pool hands each handle to one borrower at a time
/// and moves it between threads only through its lock. In return a resource must not escape
/// the `withResource` body, and must be usable from any thread (open, use and close may run
/// on different threads, one at a time). Synchronous `open` and `close` run on the calling
/// thread: the borrower's for `open`, the releasing thread's for `close`.
public final class ResourcePool<Resource>: MemoryConsumer, Sendable {
    /// One open resource.
    final class Handle: @unchecked Sendable {
        // @unchecked: `resource` is used by one owner at a time — a borrower between check-out
        // and check-in, or the closing code after taking it out of `state.idle` — and it
        // changes owner only under `state`'s lock, which orders the accesses.
        let resource: Resource
        init(_ resource: Resource) { self.resource = resource }
    }

    /// What a waiting borrower is given: an idle handle, or the right to open one.
    enum Grant: Sendable {
        case handle(Handle)
        case open
    }

    struct Waiter {
        var id: UInt64
        var continuation: CheckedContinuation<Grant, any Error>
    }

    /// An idle handle and since when it has been idle.
    struct Idle {
        var handle: Handle
        var since: ContinuousClock.Instant
    }

    struct State {
        /// Idle handles, least recently used first.
        var idle: [Idle] = []
        /// Handles open: idle and in use.
        var open = 0
        /// Opens in progress (they hold a place under the maximum).
        var opening = 0
        /// Closes in progress (they hold a place under the maximum too).
        var closing = 0
        /// Borrowers waiting for a handle, first come first.
        var waiters: [Waiter] = []
        var nextWaiterID: UInt64 = 0
        var unreportedCloseErrors: [ResourceCloseError] = []
        var retention: RetentionTracker
        /// Those waiting for the closes under way to end (``closeIdleAndWait()``).
        var closesAwaited: [CheckedContinuation<Void, Never>] = []

        /// An idle handle, or the right to open one, if the maximum allows.
        mutating func take(maximum: Int) -> Grant? {
            if let idle = idle.popLast() { return .handle(idle.handle) }
            guard open + opening + closing < maximum else { return nil }
            opening += 1
            return .open
        }

        /// Takes the first `count` idle handles out (least recently used first) to be closed.
        mutating func takeIdle(_ count: Int) -> [Handle] {
            let taken = idle.prefix(count).map(\.handle)
            idle.removeFirst(taken.count)
            open -= taken.count
            closing += taken.count
            return taken
        }

        /// `count` closes ended: their places go to waiting borrowers, and those waiting for
        /// the closes are told when none is left.
        mutating func closed(_ count: Int, maximum: Int) -> (grants: [(Waiter, Grant)], awaited: [CheckedContinuation<Void, Never>]) {
            closing -= count
            var grants: [(Waiter, Grant)] = []
            while !waiters.isEmpty, let grant = take(maximum: maximum) { grants.append((waiters.removeFirst(), grant)) }
            guard closing == 0 else { return (grants, []) }
            defer { closesAwaited = [] }
            return (grants, closesAwaited)
        }
    }

    /// The pool's name, for reports.
    public let name: String
    /// The release tier: ``/MemwarnRelease/ReleaseTier/sharedResources``.
    public let tier = ReleaseTier.sharedResources
    /// The memory one open handle holds in this process.
    public let bytesPerHandle: Int
    /// The most handles open at once.
    public let maximumCount: Int
    /// Which idle handles a release may close.
    public let retention: ResourceRetention
    let driver: ResourceDriver<Resource>
    let onCloseError: (@Sendable (ResourceCloseError) -> Void)?
    let clock: LoopClock
    let state: Locked<State>

    /// Creates an empty pool of resources opened and closed synchronously (nothing is opened
    /// until first borrowed), with the ``ResourceRetention/default`` retention, and registers it
    /// with `coordinator` (weakly: a deallocated pool leaves by itself).
    ///
    /// - Parameters:
    ///   - name: a name for reports and errors.
    ///   - bytesPerHandle: the memory one open handle holds in this process (≥ 0).
    ///   - maximumCount: the most handles open at once (≥ 1).
    ///   - coordinator: the coordinator to join, or `nil`.
    ///   - onCloseError: told of every failed close, on the closing thread, outside the lock.
    ///   - open: opens a resource; what it throws reaches the borrower.
    ///   - close: closes a resource; what it throws is reported, never swallowed.
    public convenience init(
        name: String, bytesPerHandle: Int, maximumCount: Int,
        coordinator: ReleaseCoordinator? = .shared,
        onCloseError: (@Sendable (ResourceCloseError) -> Void)? = nil,
        open: @escaping @Sendable () throws -> Resource,
        close: @escaping @Sendable (Resource) throws -> Void
    ) {
        self.init(
            name: name, bytesPerHandle: bytesPerHandle, maximumCount: maximumCount, retention: .default, coordinator: coordinator,
            onCloseError: onCloseError, driver: .synchronous(open: open, close: close), clock: .continuous)
    }

    /// Creates an empty pool of resources opened and closed synchronously, with the given
    /// retention, and registers it with `coordinator` (weakly).
    ///
    /// - Parameters:
    ///   - name: a name for reports and errors.
    ///   - bytesPerHandle: the memory one open handle holds in this process (≥ 0).
    ///   - maximumCount: the most handles open at once (≥ 1).
    ///   - retention: which idle handles a release may close.
    ///   - coordinator: the coordinator to join, or `nil`.
    ///   - onCloseError: told of every failed close, on the closing thread, outside the lock.
    ///   - open: opens a resource; what it throws reaches the borrower.
    ///   - close: closes a resource; what it throws is reported, never swallowed.
    public convenience init(
        name: String, bytesPerHandle: Int, maximumCount: Int, retention: ResourceRetention,
        coordinator: ReleaseCoordinator? = .shared,
        onCloseError: (@Sendable (ResourceCloseError) -> Void)? = nil,
        open: @escaping @Sendable () throws -> Resource,
        close: @escaping @Sendable (Resource) throws -> Void
    ) {
        self.init(
            name: name, bytesPerHandle: bytesPerHandle, maximumCount: maximumCount, retention: retention, coordinator: coordinator,
            onCloseError: onCloseError, driver: .synchronous(open: open, close: close), clock: .continuous)
    }

    /// Creates an empty pool of resources opened and closed asynchronously — a driver that
    /// connects without blocking a thread — and registers it with `coordinator` (weakly).
    ///
    /// - Parameters:
    ///   - name: a name for reports and errors.
    ///   - bytesPerHandle: the memory one open handle holds in this process (≥ 0).
    ///   - maximumCount: the most handles open at once, closes under way included (≥ 1).
    ///   - retention: which idle handles a release may close (``ResourceRetention/default``).
    ///   - coordinator: the coordinator to join, or `nil`.
    ///   - onCloseError: told of every failed close, outside the lock.
    ///   - open: opens a resource, awaited by the borrower; what it throws reaches the borrower.
    ///   - close: closes a resource; what it throws is reported, never swallowed.
    public convenience init(
        name: String, bytesPerHandle: Int, maximumCount: Int, retention: ResourceRetention = .default,
        coordinator: ReleaseCoordinator? = .shared,
        onCloseError: (@Sendable (ResourceCloseError) -> Void)? = nil,
        open: @escaping @Sendable () async throws -> Resource,
        close: @escaping @Sendable (Resource) async throws -> Void
    ) {
        self.init(
            name: name, bytesPerHandle: bytesPerHandle, maximumCount: maximumCount, retention: retention, coordinator: coordinator,
            onCloseError: onCloseError, driver: .asynchronous(open: open, close: close), clock: .continuous)
    }

    /// The designated initializer, with the clock the retention reads (tests give a manual one).
    init(
        name: String, bytesPerHandle: Int, maximumCount: Int, retention: ResourceRetention, coordinator: ReleaseCoordinator?,
        onCloseError: (@Sendable (ResourceCloseError) -> Void)?, driver: ResourceDriver<Resource>, clock: LoopClock
    ) {
        precondition(bytesPerHandle >= 0, "bytesPerHandle must not be negative")
        precondition(maximumCount >= 1, "a pool needs room for at least one handle")
        self.name = name
        self.bytesPerHandle = bytesPerHandle
        self.maximumCount = maximumCount
        self.retention = retention
        self.onCloseError = onCloseError
        self.driver = driver
        self.clock = clock
        state = Locked(State(retention: RetentionTracker(retention)))
        coordinator?.register(self)
    }

    /// Closes the idle handles (all handles are idle by then: a borrower keeps the pool
    /// alive): at once with a synchronous `close`, in a task of their own with an asynchronous
    /// one. Failures go to `onCloseError`; without one they are lost with the pool, so call
    /// ``closeIdle()`` or ``closeIdleAndWait()`` first to see them.
    deinit {
        let taken = state.withLock { $0.takeIdle($0.idle.count) }
        guard !taken.isEmpty else { return }
        let (driver, name, onCloseError) = (self.driver, self.name, self.onCloseError)
        if let close = driver.closeNow {
            for handle in taken {
                do { try close(handle.resource) } catch { onCloseError?(ResourceCloseError(pool: name, error: error)) }
            }
            return
        }
        Task {
            for handle in taken {
                do { try await driver.close(handle.resource) } catch { onCloseError?(ResourceCloseError(pool: name, error: error)) }
            }
        }
    }

    /// Handles open now, idle and in use.
    public var openCount: Int { state.withLock { $0.open } }
    /// Handles open and idle.
    public var idleCount: Int { state.withLock { $0.idle.count } }
    /// Handles lent to borrowers now.
    public var inUseCount: Int { state.withLock { $0.open - $0.idle.count } }
    /// Borrowers waiting for a handle.
    public var waitingCount: Int { state.withLock { $0.waiters.count } }
    /// Closes started and not yet ended.
    package var closingCount: Int { state.withLock { $0.closing } }
    /// How many times handles that a release closed came back soon after (each one made the
    /// pool wait longer before closing idle handles).
    public var comebackCount: Int { state.withLock { $0.retention.comebacks } }

    /// The close failures of ``release(_:)`` and of closes started without waiting not yet
    /// reported (kept only when there is no `onCloseError`); taking them empties the list.
    ///
    /// - Returns: the failures, oldest first.
    public func takeCloseErrors() -> [ResourceCloseError] {
        state.withLock { state in
            defer { state.unreportedCloseErrors = [] }
            return state.unreportedCloseErrors
        }
    }

    // MARK: MemoryConsumer

    /// Handles open × ``bytesPerHandle``.
    public var footprintBytes: Int { openCount * bytesPerHandle }

    /// What no release can close now, × ``bytesPerHandle``: the handles lent to borrowers and
    /// the idle ones the ``retention`` keeps.
    public var inUseBytes: Int? {
        let now = clock.now
        return state.withLock { state in
            let closable = state.retention.closable(idleSince: state.idle.map(\.since), openCount: state.open, now: now)
            return (state.open - closable) * bytesPerHandle
        }
    }

    /// Closes idle handles that the ``retention`` lets go, least recently used first, until
    /// `targetBytes` are freed (the pool holds no discarded content: a
    /// ``/MemwarnRelease/ReleaseTier/discarded`` request frees nothing). Handles in use stay open.
    /// With an asynchronous `close` the handles leave the pool at once and their closes are
    /// started, not awaited. Failed closes count as freed (the handle is dropped) and are
    /// reported to `onCloseError`, or kept for ``takeCloseErrors()``.
    ///
    /// - Parameter request: the tier being walked and the bytes still wanted.
    /// - Returns: the bytes the handles closed held: their count × ``bytesPerHandle``.
    /// - Complexity: O(n) in the idle handles, plus their synchronous `close`.
    public func release(_ request: ReleaseRequest) -> Int {
        guard request.tier != .discarded, request.targetBytes > 0 else { return 0 }
        let wanted =
            bytesPerHandle == 0
            ? Int.max
            : request.targetBytes / bytesPerHandle + (request.targetBytes % bytesPerHandle == 0 ? 0 : 1)
        let now = clock.now
        let taken = state.withLock { state in
            let closable = state.retention.closable(idleSince: state.idle.map(\.since), openCount: state.open, now: now)
            let count = min(wanted, closable)
            state.retention.released(count, at: now)
            return state.takeIdle(count)
        }
        _ = close(taken, keepUnreported: true)
        return taken.count * bytesPerHandle
    }
}

public import MemwarnRelease
import MemwarnSystem

/// A bounded pool of shared-resource handles — connections, file descriptors, devices — whose
/// idle handles are closed when memory is tight or the owner goes to the background, and
/// reopened lazily: tier ``/MemwarnRelease/ReleaseTier/sharedResources`` (asked at `.critical` only).
///
/// This is iOS's "close database connections and release shared hardware" for Linux
/// services. ``withResource(isolation:_:)`` lends a handle, reusing an idle one or opening a
/// new one; at most ``maximumCount`` handles are open at once and further borrowers wait,
/// first come first served. A handle in use is never closed under its user: ``closeIdle()``
/// and ``release(_:)`` close idle handles only, least recently used first.
///
/// Close failures are never swallowed: every one goes to `onCloseError` when it is set;
/// ``closeIdle()`` also returns its own; those from ``release(_:)`` (which returns only a
/// byte count) are kept, when there is no `onCloseError`, until ``takeCloseErrors()``.
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
/// on different threads, one at a time). `open` and `close` run on the calling thread: the
/// borrower's for `open`, the releasing thread's for `close`.
public final class ResourcePool<Resource>: MemoryConsumer, Sendable {
    /// One open resource.
    final class Handle: @unchecked Sendable {
        // @unchecked: `resource` is used by one owner at a time — a borrower between check-out
        // and check-in, or the closing thread after taking it out of `state.idle` — and it
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

    struct State {
        /// Idle handles, least recently used first.
        var idle: [Handle] = []
        /// Handles open: idle and in use.
        var open = 0
        /// Opens in progress (they hold a place under the maximum).
        var opening = 0
        /// Borrowers waiting for a handle, first come first.
        var waiters: [Waiter] = []
        var nextWaiterID: UInt64 = 0
        var unreportedCloseErrors: [ResourceCloseError] = []

        /// An idle handle, or the right to open one, if the maximum allows.
        mutating func take(maximum: Int) -> Grant? {
            if let handle = idle.popLast() { return .handle(handle) }
            guard open + opening < maximum else { return nil }
            opening += 1
            return .open
        }
    }

    /// The pool's name, for reports.
    public let name: String
    /// The release tier: ``/MemwarnRelease/ReleaseTier/sharedResources``.
    public let tier = ReleaseTier.sharedResources
    /// The memory one open handle accounts for.
    public let bytesPerHandle: Int
    /// The most handles open at once.
    public let maximumCount: Int
    private let openResource: @Sendable () throws -> Resource
    private let closeResource: @Sendable (Resource) throws -> Void
    private let onCloseError: (@Sendable (ResourceCloseError) -> Void)?
    private let state = Locked(State())

    /// Creates an empty pool (nothing is opened until first borrowed) and registers it with
    /// `coordinator` (weakly: a deallocated pool leaves by itself).
    ///
    /// - Parameters:
    ///   - name: a name for reports and errors.
    ///   - bytesPerHandle: the memory one open handle accounts for (≥ 0).
    ///   - maximumCount: the most handles open at once (≥ 1).
    ///   - coordinator: the coordinator to join, or `nil`.
    ///   - onCloseError: told of every failed close, on the closing thread, outside the lock.
    ///   - open: opens a resource; what it throws reaches the borrower.
    ///   - close: closes a resource; what it throws is reported, never swallowed.
    public init(
        name: String, bytesPerHandle: Int, maximumCount: Int,
        coordinator: ReleaseCoordinator? = .shared,
        onCloseError: (@Sendable (ResourceCloseError) -> Void)? = nil,
        open: @escaping @Sendable () throws -> Resource,
        close: @escaping @Sendable (Resource) throws -> Void
    ) {
        precondition(bytesPerHandle >= 0, "bytesPerHandle must not be negative")
        precondition(maximumCount >= 1, "a pool needs room for at least one handle")
        self.name = name
        self.bytesPerHandle = bytesPerHandle
        self.maximumCount = maximumCount
        self.onCloseError = onCloseError
        self.openResource = open
        self.closeResource = close
        coordinator?.register(self)
    }

    /// Closes the idle handles (all handles are idle by then: a borrower keeps the pool
    /// alive). Failures go to `onCloseError`; without one they are lost with the pool, so
    /// call ``closeIdle()`` first to see them.
    deinit {
        _ = closeIdle(limit: .max, keepUnreported: false)
    }

    /// Handles open now, idle and in use.
    public var openCount: Int { state.withLock { $0.open } }
    /// Handles open and idle.
    public var idleCount: Int { state.withLock { $0.idle.count } }
    /// Handles lent to borrowers now.
    public var inUseCount: Int { state.withLock { $0.open - $0.idle.count } }
    /// Borrowers waiting for a handle.
    public var waitingCount: Int { state.withLock { $0.waiters.count } }

    /// Lends a handle to `body`: an idle one (the most recently used), else a new one if
    /// fewer than ``maximumCount`` are open, else the first one returned (waiting in line).
    ///
    /// The handle goes back to the pool when `body` returns or throws; it is not closed
    /// while `body` runs.
    ///
    /// - Parameters:
    ///   - isolation: the caller's actor, on which `body` runs.
    ///   - body: uses the resource; it must not keep it.
    /// - Returns: what `body` returns.
    /// - Complexity: O(1) plus `open` when the pool opens a handle, plus O(w) in the waiters
    ///   when it has to wait.
    /// - Throws: what `open` or `body` throws; `CancellationError` when the task is
    ///   cancelled while waiting for a handle.
    public func withResource<T>(
        isolation: isolated (any Actor)? = #isolation,
        _ body: (Resource) async throws -> T
    ) async throws -> T {
        let handle = try await checkOut()
        let result: T
        do {
            result = try await body(handle.resource)
        } catch {
            checkIn(handle)
            throw error
        }
        checkIn(handle)
        return result
    }

    /// Closes every idle handle, least recently used first: the hook for going to the
    /// background, and what a memory release does when it wants them all. Handles in use
    /// stay open (close them with a later call, once they are idle).
    ///
    /// - Returns: what was closed and what failed (failures also go to `onCloseError`).
    /// - Complexity: O(n) in the idle handles, plus their `close`.
    @discardableResult
    public func closeIdle() -> ResourceCloseResult {
        closeIdle(limit: .max, keepUnreported: false)
    }

    /// The close failures of ``release(_:)`` not yet reported (kept only when there is no
    /// `onCloseError`); taking them empties the list.
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

    /// Handles lent to borrowers × ``bytesPerHandle``: no release closes them.
    public var inUseBytes: Int? { inUseCount * bytesPerHandle }

    /// Closes idle handles, least recently used first, until `targetBytes` are freed (the
    /// pool holds no discarded content: a ``/MemwarnRelease/ReleaseTier/discarded`` request frees nothing).
    /// Handles in use stay open. Failed closes count as freed (the handle is dropped) and
    /// are reported to `onCloseError`, or kept for ``takeCloseErrors()``.
    ///
    /// - Parameter request: the tier being walked and the bytes still wanted.
    /// - Returns: the bytes freed.
    /// - Complexity: O(n) in the idle handles, plus their `close`.
    public func release(_ request: ReleaseRequest) -> Int {
        guard request.tier != .discarded, request.targetBytes > 0 else { return 0 }
        let wanted =
            bytesPerHandle == 0
            ? Int.max
            : request.targetBytes / bytesPerHandle + (request.targetBytes % bytesPerHandle == 0 ? 0 : 1)
        return closeIdle(limit: wanted, keepUnreported: true).bytesFreed
    }

    // MARK: Lending

    private func checkOut() async throws -> Handle {
        let maximum = maximumCount
        var grant = state.withLock { $0.take(maximum: maximum) }
        if grant == nil {
            let id = state.withLock { state in
                state.nextWaiterID += 1
                return state.nextWaiterID
            }
            grant = try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Grant, any Error>) in
                    let now: Result<Grant, any Error>? = state.withLock { state in
                        if Task.isCancelled { return .failure(CancellationError()) }
                        if let grant = state.take(maximum: maximum) { return .success(grant) }
                        state.waiters.append(Waiter(id: id, continuation: continuation))
                        return nil
                    }
                    if let now { continuation.resume(with: now) }
                }
            } onCancel: {
                let waiter = state.withLock { state in
                    state.waiters.firstIndex { $0.id == id }.map { state.waiters.remove(at: $0) }
                }
                waiter?.continuation.resume(throwing: CancellationError())
            }
        }
        switch grant! {
        case .handle(let handle):
            return handle
        case .open:
            let handle: Handle
            do {
                handle = try Handle(openResource())
            } catch {
                // Pass the place on: someone waiting may open instead.
                let next = state.withLock { state -> Waiter? in
                    state.opening -= 1
                    guard !state.waiters.isEmpty else { return nil }
                    state.opening += 1
                    return state.waiters.removeFirst()
                }
                next?.continuation.resume(returning: .open)
                throw error
            }
            state.withLock { state in
                state.opening -= 1
                state.open += 1
            }
            return handle
        }
    }

    private func checkIn(_ handle: Handle) {
        let next = state.withLock { state -> Waiter? in
            guard state.waiters.isEmpty else { return state.waiters.removeFirst() }
            state.idle.append(handle)
            return nil
        }
        next?.continuation.resume(returning: .handle(handle))
    }

    // MARK: Closing

    private func closeIdle(limit: Int, keepUnreported: Bool) -> ResourceCloseResult {
        let (taken, inUse) = state.withLock { state in
            let count = min(limit, state.idle.count)
            let taken = Array(state.idle.prefix(count))
            state.idle.removeFirst(count)
            state.open -= count
            return (taken, state.open - state.idle.count)
        }
        var failures: [ResourceCloseError] = []
        for handle in taken {
            do {
                try closeResource(handle.resource)
            } catch {
                failures.append(ResourceCloseError(pool: name, error: error))
            }
        }
        if let onCloseError {
            for failure in failures { onCloseError(failure) }
        } else if keepUnreported && !failures.isEmpty {
            state.withLock { $0.unreportedCloseErrors.append(contentsOf: failures) }
        }
        return ResourceCloseResult(closed: taken.count, bytesFreed: taken.count * bytesPerHandle, inUse: inUse, failures: failures)
    }
}

/// A handle that a ``ResourcePool`` failed to close: the pool's name and the error its
/// `close` closure threw.
///
/// The pool has dropped the handle all the same (a handle whose close failed is in an
/// unknown state and is never handed out again), so it no longer counts in the footprint.
public struct ResourceCloseError: Error, Sendable, CustomStringConvertible {
    /// The kind of failure (one kind: the pool's `close` closure threw; ``error`` says what).
    package struct Code: Sendable, Hashable, CustomStringConvertible {
        private enum Base: String, Sendable, Hashable { case closeFailed }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// The pool's `close` closure threw.
        package static let closeFailed = Code(.closeFailed)

        package var description: String { base.rawValue }
    }

    /// The kind of failure: ``Code/closeFailed``.
    package var code: Code { .closeFailed }
    /// The pool's name.
    public var pool: String
    /// What `close` threw.
    public var error: any Error

    /// Creates an error.
    ///
    /// - Parameters:
    ///   - pool: the pool's name.
    ///   - error: what `close` threw.
    package init(pool: String, error: any Error) {
        self.pool = pool
        self.error = error
    }

    public var description: String { "\(pool): closing a handle failed: \(error)" }
}

/// What one ``ResourcePool/closeIdle()`` did.
public struct ResourceCloseResult: Sendable, CustomStringConvertible {
    /// The idle handles closed, failed closes included (they are dropped too).
    public var closed: Int
    /// The bytes those handles accounted for.
    public var bytesFreed: Int
    /// The handles left open because they were in use.
    public var inUse: Int
    /// The closes that failed, in the order tried.
    public var failures: [ResourceCloseError]

    /// Creates a result.
    ///
    /// - Parameters:
    ///   - closed: the idle handles closed, failed closes included.
    ///   - bytesFreed: the bytes those handles accounted for.
    ///   - inUse: the handles left open because they were in use.
    ///   - failures: the closes that failed, in the order tried.
    package init(closed: Int, bytesFreed: Int, inUse: Int, failures: [ResourceCloseError]) {
        self.closed = closed
        self.bytesFreed = bytesFreed
        self.inUse = inUse
        self.failures = failures
    }

    /// Whether every close succeeded.
    public var succeeded: Bool { failures.isEmpty }

    public var description: String {
        "closed \(closed) (\(bytesFreed) bytes), \(inUse) in use, \(failures.count) failed"
    }
}

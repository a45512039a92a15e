/// ``DiscardableContent`` that can discard itself into a batch: what it frees is gathered in
/// the batch and given back when the batch finishes, so a cache discarding many in a row pays
/// the bookkeeping once for many (``PurgeableData`` gathers its blocks page by page).
///
/// ``DiscardableCache`` discards such content into one batch per release. It knows nothing
/// else of the content's memory: the allocator behind it is the content's own business.
@usableFromInline package protocol BatchDiscardableContent: DiscardableContent {
    /// ``DiscardableContent/discardContentIfPossible()``, with what it frees gathered into
    /// `batch` rather than freed alone.
    ///
    /// - Parameter batch: the batch of the discards in progress.
    /// - Returns: whether the content is discarded now (it was not in use).
    func discardContentIfPossible(into batch: inout DiscardBatch) -> Bool

    /// ``discardContentIfPossible(into:)`` on the object at `object`, an instance of this type
    /// that the caller keeps alive (a cache's entry): the entry point a cache calls a million
    /// times in a release, with no reference counting. The default calls the method on a
    /// guaranteed reference; a type implements it only to be called without a generic hop.
    ///
    /// - Parameters:
    ///   - object: the object's address (`Unmanaged.toOpaque()`), kept alive by the caller.
    ///   - batch: the batch of the discards in progress.
    /// - Returns: whether the content is discarded now.
    static func discardContent(at object: UnsafeMutableRawPointer, into batch: inout DiscardBatch) -> Bool
}

extension BatchDiscardableContent {
    /// Calls ``discardContentIfPossible(into:)`` on a guaranteed reference to the object at `object`.
    ///
    /// - Parameters:
    ///   - object: the object's address, kept alive by the caller.
    ///   - batch: the batch of the discards in progress.
    /// - Returns: whether the content is discarded now.
    @inlinable
    package static func discardContent(at object: UnsafeMutableRawPointer, into batch: inout DiscardBatch) -> Bool {
        Unmanaged<Self>.fromOpaque(object)._withUnsafeGuaranteedRef { $0.discardContentIfPossible(into: &batch) }
    }

    /// ``DiscardableContent/discardContentIfPossible()`` on the object at `object`, as
    /// ``discardContent(at:into:)`` calls it.
    ///
    /// - Returns: whether the content is discarded now.
    @inlinable
    static func discardContentAlone(at object: UnsafeMutableRawPointer) -> Bool {
        Unmanaged<Self>.fromOpaque(object)._withUnsafeGuaranteedRef { content in
            content.discardContentIfPossible()
            return content.isContentDiscarded()
        }
    }

    /// ``DiscardableContent/isContentDiscarded()`` on the object at `object`, as
    /// ``discardContent(at:into:)`` calls it.
    @inlinable
    static func isContentDiscarded(at object: UnsafeMutableRawPointer) -> Bool {
        Unmanaged<Self>.fromOpaque(object)._withUnsafeGuaranteedRef { $0.isContentDiscarded() }
    }
}

/// What one kind of `BatchDiscardableContent` gathers in a `DiscardBatch`: the frees it
/// defers, given back by ``finish()``.
@usableFromInline package protocol DiscardBatchLane: AnyObject {
    /// Gives back everything gathered. Called once, when the batch finishes.
    func finish()
}

/// The discards of one release: a lane for each kind of content that discarded into it, each
/// finished when the batch is (when it goes out of scope).
@usableFromInline package struct DiscardBatch: ~Copyable {
    @usableFromInline var lanes: [any DiscardBatchLane] = []
    /// The lane asked for last and its type: a batch is usually asked for one lane a million
    /// times in a row.
    @usableFromInline var last: (type: ObjectIdentifier, lane: Unmanaged<AnyObject>)?

    /// An empty batch.
    @usableFromInline package init() {}

    deinit {
        for lane in lanes { lane.finish() }
    }

    /// Calls `body` with the lane of type `Lane`, made by `make` the first time it is asked
    /// for, lent without reference counting.
    ///
    /// - Parameters:
    ///   - make: makes the lane.
    ///   - body: uses the lane; it must not keep it.
    /// - Returns: what `body` returns.
    /// - Complexity: O(1) when the lane asked for last is asked again; else O(k) for k kinds of
    ///   content in the batch (usually 1).
    @inlinable
    package mutating func withLane<Lane: DiscardBatchLane, Result>(_ make: () -> Lane, _ body: (Lane) -> Result) -> Result {
        if let last, last.type == ObjectIdentifier(Lane.self) {
            return last.lane._withUnsafeGuaranteedRef { body(unsafeDowncast($0, to: Lane.self)) }
        }
        return body(lane(make))
    }

    /// The lane of type `Lane`, made by `make` the first time it is asked for (``withLane(_:_:)``
    /// lends it without reference counting, for a discard of one block among a million).
    ///
    /// - Parameter make: makes the lane.
    /// - Returns: the lane.
    /// - Complexity: O(1) when the lane asked for last is asked again; else O(k) for k kinds of
    ///   content in the batch (usually 1).
    @inlinable
    package mutating func lane<Lane: DiscardBatchLane>(_ make: () -> Lane) -> Lane {
        if let last, last.type == ObjectIdentifier(Lane.self) {
            return unsafeDowncast(last.lane.takeUnretainedValue(), to: Lane.self)
        }
        for lane in lanes where ObjectIdentifier(type(of: lane)) == ObjectIdentifier(Lane.self) {
            last = (ObjectIdentifier(Lane.self), Unmanaged.passUnretained(lane as AnyObject))
            return unsafeDowncast(lane, to: Lane.self)
        }
        let lane = make()
        lanes.append(lane)  // held here: `last` refers to it unretained
        last = (ObjectIdentifier(Lane.self), Unmanaged.passUnretained(lane as AnyObject))
        return lane
    }
}

/// Content that can be discarded when memory is tight and not in use: Apple's
/// `NSDiscardableContent`, for Linux.
///
/// Bracket every use with ``beginContentAccess()`` and ``endContentAccess()``; content
/// with a positive access count is never discarded. ``DiscardableCache`` calls
/// ``discardContentIfPossible()`` on a memory warning and, when
/// ``DiscardableCache/evictsObjectsWithDiscardedContent`` is set, drops entries whose content
/// is gone.
///
/// Content is `Sendable`: memwarn asks it to discard from the releasing thread. A cache calls
/// ``isContentDiscarded()`` and ``discardContentIfPossible()`` while it holds its lock: they must
/// not call back into that cache (the lock is not re-entrant; the call would wait for ever).
public protocol DiscardableContent: AnyObject, Sendable {
    /// Marks the content as in use. Returns `false` if it was already discarded (then it
    /// is not in use and must be rebuilt).
    ///
    /// - Returns: `true` when the content is there and now in use.
    func beginContentAccess() -> Bool
    /// Ends one use begun with ``beginContentAccess()``.
    func endContentAccess()
    /// Discards the content if no one is using it.
    func discardContentIfPossible()
    /// Whether the content has been discarded.
    ///
    /// - Returns: `true` once the content is gone.
    func isContentDiscarded() -> Bool
}

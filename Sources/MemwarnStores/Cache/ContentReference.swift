/// A slot's ``DiscardableContent`` in a cache's side array, not retained: it is the node's
/// value, which holds the object for as long as the reference is in the side array
/// (``CacheStorage/setContent(_:at:)`` replaces or clears it whenever the value changes).
///
/// Asking a million entries whether their content was discarded is a release's inner loop,
/// so a reference is `unowned(unsafe)`: no reference count is kept for it. Content that can
/// discard into a batch (`BatchDiscardableContent`) is told so, to gather its frees.
@usableFromInline
enum ContentReference {
    case batched(Batched)
    case other(Other)

    /// Batch-discardable content as its object, unretained, and its type: a discard opens the
    /// type and calls the content on a guaranteed reference, with no reference counting (an
    /// `unowned(unsafe)` existential is retained around every call: measured, a third of a
    /// release of a million entries).
    @usableFromInline
    struct Batched {
        @usableFromInline let object: Unmanaged<AnyObject>
        @usableFromInline let type: any BatchDiscardableContent.Type

        @inlinable
        init(_ content: any BatchDiscardableContent) {
            object = Unmanaged.passUnretained(content as AnyObject)
            type = Swift.type(of: content)
        }

        @inlinable
        func discard(into batch: inout DiscardBatch) -> Bool {
            type.discardContent(at: object.toOpaque(), into: &batch)
        }
    }

    @usableFromInline
    struct Other {
        @usableFromInline unowned(unsafe) let content: any DiscardableContent

        @inlinable
        init(_ content: any DiscardableContent) { self.content = content }
    }

    @inlinable
    init(_ content: any DiscardableContent) {
        if let batched = content as? any BatchDiscardableContent {
            self = .batched(Batched(batched))
        } else {
            self = .other(Other(content))
        }
    }

    /// The address of the content's object, to prefetch.
    @inlinable
    var objectAddress: UnsafeRawPointer {
        switch self {
        case .batched(let batched): UnsafeRawPointer(batched.object.toOpaque())
        case .other(let other): UnsafeRawPointer(Unmanaged.passUnretained(other.content as AnyObject).toOpaque())
        }
    }

    /// ``discard()``, with what batch-discardable content frees gathered into `batch`.
    ///
    /// - Returns: whether the content is discarded now (it was not in use).
    @inlinable
    func discard(into batch: inout DiscardBatch) -> Bool {
        guard case .batched(let batched) = self else { return discard() }
        return batched.discard(into: &batch)
    }

    @inlinable
    func isContentDiscarded() -> Bool {
        switch self {
        case .batched(let batched): batched.type.isContentDiscarded(at: batched.object.toOpaque())
        case .other(let other): other.content.isContentDiscarded()
        }
    }

    /// Asks the content to discard itself.
    ///
    /// - Returns: whether it is discarded now (it was not in use).
    @inlinable
    func discard() -> Bool {
        switch self {
        case .batched(let batched):
            return batched.type.discardContentAlone(at: batched.object.toOpaque())
        case .other(let other):
            let content = other.content
            content.discardContentIfPossible()
            return content.isContentDiscarded()
        }
    }
}

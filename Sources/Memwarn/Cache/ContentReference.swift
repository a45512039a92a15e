/// A slot's ``DiscardableContent`` in a cache's side array, not retained: it is the node's
/// value, which holds the object for as long as the reference is in the side array
/// (``CacheStorage/setContent(_:at:)`` replaces or clears it whenever the value changes).
///
/// Asking a million entries whether their content was discarded is a release's inner loop,
/// so a reference costs no reference counting: ``PurgeableData`` is called through
/// `Unmanaged` (a direct call on a borrowed object), any other content through an
/// `unowned(unsafe)` existential (which Swift retains around each call).
@usableFromInline
enum ContentReference {
    case purgeable(Unmanaged<PurgeableData>)
    case other(Other)

    @usableFromInline
    struct Other {
        @usableFromInline unowned(unsafe) let content: any DiscardableContent

        @inlinable
        init(_ content: any DiscardableContent) { self.content = content }
    }

    @inlinable
    init(_ content: any DiscardableContent) {
        if let data = content as? PurgeableData {
            self = .purgeable(.passUnretained(data))
        } else {
            self = .other(Other(content))
        }
    }

    /// The address of the content's object, to prefetch.
    @inlinable
    var objectAddress: UnsafeRawPointer {
        switch self {
        case .purgeable(let data): UnsafeRawPointer(data.toOpaque())
        case .other(let other): UnsafeRawPointer(Unmanaged.passUnretained(other.content as AnyObject).toOpaque())
        }
    }

    /// ``discard()``, with ``PurgeableData``'s block counted into `deallocations` rather than
    /// freed alone.
    ///
    /// - Returns: whether the content is discarded now (it was not in use).
    @inlinable
    func discard(into deallocations: inout PurgeableArena.Deallocations) -> Bool {
        guard case .purgeable(let data) = self else { return discard() }
        return data._withUnsafeGuaranteedRef { $0.discardContentIfPossible(into: &deallocations) }
    }

    @inlinable
    func isContentDiscarded() -> Bool {
        switch self {
        case .purgeable(let data): data._withUnsafeGuaranteedRef { $0.isContentDiscarded() }
        case .other(let other): other.content.isContentDiscarded()
        }
    }

    /// Asks the content to discard itself.
    ///
    /// - Returns: whether it is discarded now (it was not in use).
    @inlinable
    func discard() -> Bool {
        switch self {
        case .purgeable(let data):
            return data._withUnsafeGuaranteedRef { data in
                data.discardContentIfPossible()
                return data.isContentDiscarded()
            }
        case .other(let other):
            let content = other.content
            content.discardContentIfPossible()
            return content.isContentDiscarded()
        }
    }
}

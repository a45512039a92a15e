/// A weak reference to a registered object, as the coordinator holds its consumers and its
/// memory-warning responders: registering one does not keep it alive.
///
/// `Object` is a class-bound protocol's existential (`any MemoryConsumer`), which Swift does not
/// accept where `AnyObject` is required; the reference is kept as `AnyObject` and given back as
/// `Object` (the cast is a lookup in the runtime's conformance cache).
package final class WeakReference<Object>: @unchecked Sendable {
    // @unchecked: `reference` is a weak reference written once at init; reads are atomic.
    private weak var reference: AnyObject?

    package init(_ object: Object) { reference = object as AnyObject }

    /// The object, or `nil` once it is deallocated.
    package var object: Object? { reference.flatMap { $0 as? Object } }

    /// Whether the object is still alive (no cast: for pruning and for "any left?").
    package var isAlive: Bool { reference != nil }
}

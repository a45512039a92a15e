/// An observer of level events that is handed the latest event first, unless a newer one reached
/// it before.
final class LatestFirst: @unchecked Sendable {
    // @unchecked: `delivered` is touched only on the monitor's loop thread, where every level
    // event is posted and the latest one is handed over.
    private let observer: @Sendable (LevelEvent) -> Void
    private var delivered = false

    init(_ observer: @escaping @Sendable (LevelEvent) -> Void) { self.observer = observer }

    func deliver(_ event: LevelEvent) {
        delivered = true
        observer(event)
    }

    func deliverFirst(_ latest: LevelEvent) {
        guard !delivered else { return }
        deliver(latest)
    }
}

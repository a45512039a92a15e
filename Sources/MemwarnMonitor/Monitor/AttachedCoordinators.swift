import MemwarnRelease
import MemwarnSystem

/// The coordinators attached to a monitor (`ReleaseCoordinator.attach(to:)`), in the order
/// attached: the monitor adds and removes them, its release loop reads them for each release.
///
/// One object both hold, so the release thread reads the coordinators without calling back into
/// the monitor. It outlives a run: coordinators attached before ``PressureMonitor/run()`` or
/// between runs are there when the next run's release loop starts.
final class AttachedCoordinators: Sendable {
    private let attached = Locked<[(id: Int, coordinator: ReleaseCoordinator)]>([])

    /// Attaches `coordinator` under `id`, or returns the id it is already attached under (a
    /// coordinator attached twice would release twice per reading).
    ///
    /// - Parameters:
    ///   - coordinator: the coordinator.
    ///   - id: the id to attach it under when it is new.
    /// - Returns: the id it is attached under.
    func attach(_ coordinator: ReleaseCoordinator, id: Int) -> Int {
        attached.withLock { attached in
            if let existing = attached.first(where: { $0.coordinator === coordinator }) { return existing.id }
            attached.append((id, coordinator))
            return id
        }
    }

    /// Detaches the coordinator attached under `id`, if any.
    ///
    /// - Parameter id: what ``attach(_:id:)`` returned.
    func detach(id: Int) {
        attached.withLock { attached in attached.removeAll { $0.id == id } }
    }

    /// The coordinators attached now, in the order attached.
    var current: [ReleaseCoordinator] { attached.withLock { attached in attached.map(\.coordinator) } }
}

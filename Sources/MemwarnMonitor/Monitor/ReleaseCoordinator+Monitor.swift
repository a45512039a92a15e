public import MemwarnRelease

// The coordinator joins a monitor here, in the monitor's layer: the release layer knows nothing
// of monitors.

/// A coordinator that releases on a monitor's warnings.
extension ReleaseCoordinator {
    /// Releases automatically for a monitor: on every rise of its level to `.warning` or
    /// `.critical`, and again whenever usage climbs back to the warning mark while the level
    /// stays raised — each time to a target (the recovery mark less
    /// headroom for the measured growth; just under the warning mark for a release while the level
    /// stays raised at `.warning`), sized from the reading that asked for it (or, after a
    /// memory-warning responder, from a measurement of what it freed).
    ///
    /// Releases run on the monitor's release thread (`memwarn-release`), never on the thread that
    /// reads the kernel's events (`memwarn-monitor`, where level observers are called): detection
    /// does not wait for a release. At most one release is under way;
    /// readings that arrive meanwhile are coalesced. The thread starts and stops with the
    /// monitor's ``PressureMonitor/run()``, so the `ServiceGroup` that runs the monitor owns it.
    /// Attaching before or while the monitor runs both work.
    ///
    /// Before a release for a rise, the coordinator's ``/MemwarnRelease/MemoryWarningResponder``s are told (see
    /// ``/MemwarnRelease/ReleaseCoordinator/addWarningResponder(_:)``). Attaching the same coordinator twice attaches it once.
    ///
    /// - Parameter monitor: the monitor whose levels start releases.
    /// - Returns: an observer token (``PressureMonitor/ObserverToken``, the kind
    ///   ``PressureMonitor/addObserver(_:)`` returns); ``PressureMonitor/removeObserver(_:)`` with
    ///   it detaches the coordinator from the monitor: no more automatic releases for it.
    @discardableResult
    public func attach(to monitor: PressureMonitor) -> PressureMonitor.ObserverToken {
        monitor.attach(self)
    }
}

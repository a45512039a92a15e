package import CgroupKit

/// What a ``MonitorEngine`` tells its monitor, on the loop thread: return quickly.
package protocol MonitorEngineOutput: AnyObject {
    /// A level event for observers and streams: the first reading, then every change.
    func engineEmitted(_ event: LevelEvent)
    /// Every reading, changed or not (metrics, the forecast); the engine hands it to the
    /// release loop itself.
    func engineRead(_ reading: MonitorReading)
    /// What the monitor listens to, one line a source, once the sources are registered.
    func engineListens(to sources: [String])
    /// How changes of usage reach the engine changed (cgroup v1 as root: from continuous
    /// sampling to the usage thresholds, once registering them took `after`).
    func engineWatchesUsage(by watch: MonitorArming.UsageWatch, after: Duration)
    /// A read failed transiently and will be retried (`nil`: reads succeed again).
    func engineNoted(transientError: CgroupError?)
}

/// What takes every decided reading off an engine's loop thread: a service's ``ReleaseLoop``, a
/// node agent's rounds. Called on the loop thread for every full reading: return at once.
package protocol MonitorReadingConsumer: AnyObject, Sendable {
    /// Takes a reading; never blocks.
    func offer(_ reading: MonitorReading)
}

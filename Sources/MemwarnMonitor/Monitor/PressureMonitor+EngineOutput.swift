import CgroupKit
import MemwarnRelease

// What the engine tells the monitor, on the loop thread (and exhaustion, on the release thread):
// kept for the monitor's accessors, counted in its metrics, posted to its observers.
extension PressureMonitor {
    /// Every reading: metrics and the latest forecast (the engine hands it to the release loop too).
    func record(_ reading: MonitorReading) {
        metrics.record(reading)
        state.withLock { state in
            state.tally = reading.tally
            state.latestForecast = reading.event.forecast
            state.latestSnapshot = reading.event.snapshot
        }
    }

    /// The exhausted state changed (release thread).
    func publish(_ change: MemoryExhaustion) {
        state.withLock { $0.exhaustion = change }
        exhausted.store(change.isExhausted, ordering: .relaxed)
        metrics.record(change)
        exhaustionChanges.post(change)
    }

    func publish(_ event: LevelEvent) {
        metrics.recordChange(to: event.level)
        logger.log(
            level: event.level == .normal ? .info : .warning, "memory pressure \(event.level)",
            metadata: [
                "previous": "\(event.previous?.rawValue ?? "none")", "source": "\(event.source)",
                "usage": "\(event.snapshot.usageBytes)", "limit": "\(event.snapshot.capacityBytes.map(String.init) ?? "none")",
                "secondsToLimit": "\(event.forecast.map { String(Int($0.secondsToLimit.rounded())) } ?? "none")",
            ])
        levelEvents.post(event)
    }

    /// A transient read error (`nil`: reads work again). Monitor thread.
    func noteTransient(_ error: CgroupError?) {
        state.withLock { state in
            state.retryingReads = error != nil
            if let error {
                state.transientErrors += 1
                state.lastTransientError = error
            }
        }
        if error != nil { metrics.recordTransientError() }
    }

    func noteUsageWatch(_ watch: MonitorArming.UsageWatch, after: Duration) {
        state.withLock { state in
            state.usageWatch = watch
            // The start-up figure only: thresholds planned again for a new limit do not overwrite it.
            if watch == .thresholds, state.arming?.thresholdsRegisteredAfter == nil { state.arming?.thresholdsRegisteredAfter = after }
        }
    }

    func noteSources(_ sources: [String]) {
        state.withLock { $0.sources = sources }
    }
}

/// The monitor's side of its engine, on the loop thread. It holds the monitor weakly: a
/// monitor dropped while armed ends its session (``PressureMonitor/deinit``).
final class EngineOutput: MonitorEngineOutput {
    private weak let monitor: PressureMonitor?

    init(_ monitor: PressureMonitor?) { self.monitor = monitor }

    func engineEmitted(_ event: LevelEvent) { monitor?.publish(event) }
    func engineRead(_ reading: MonitorReading) { monitor?.record(reading) }
    func engineListens(to sources: [String]) { monitor?.noteSources(sources) }
    func engineNoted(transientError: CgroupError?) { monitor?.noteTransient(transientError) }
    func engineWatchesUsage(by watch: MonitorArming.UsageWatch, after: Duration) { monitor?.noteUsageWatch(watch, after: after) }
}

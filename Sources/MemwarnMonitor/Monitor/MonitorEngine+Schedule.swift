import CgroupKit
import MemwarnRelease
import MemwarnSystem

// What the engine schedules: the reading the level asks for next, and the usage sampler's reads.
extension MonitorEngine {
    /// Schedules the reading the level asks for (a step down's end, a recheck while raised), in
    /// place of the one scheduled before.
    func scheduleLevelReading(_ next: LevelMachine.NextReading?) {
        if let pending = levelDeadline {
            if pending.reading == next { return }
            loop.cancel(pending.deadline)
        }
        levelDeadline = nil
        guard let next else { return }
        let deadline = loop.schedule(at: next.at) { [unowned self] in
            levelDeadline = nil
            wake(hint: .readNow, source: next.cause)
        }
        levelDeadline = (deadline, next)
    }

    /// Hands a full reading (if any) to the usage sampler and schedules its next read.
    func resample(after snapshot: PressureSnapshot, now: ContinuousClock.Instant) {
        guard let usageSampling else { return }
        if let thresholds, thresholds.replanIfTheLimitsChanged(snapshot) {
            output.engineWatchesUsage(by: usageWatch, after: .zero)
            publishLines()
        }
        do {
            if try usageSampling.observe(snapshot, at: now) { publishLines() }
        } catch  where error.isTransient {
            transient.failed(error, owing: (.readNow, .poll), source: nil)
        } catch {
            fail(error)
            return
        }
        scheduleSample(after: now)
    }

    /// Schedules the sampler's next read (none when it asks for none: a guarded sampler outside
    /// its bands).
    func scheduleSample(after now: ContinuousClock.Instant) {
        guard let usageSampling else { return }
        if let pending = sampleDeadline { loop.cancel(pending) }
        sampleDeadline = nil
        guard let at = usageSampling.nextRead(after: now) else { return }
        sampleDeadline = loop.schedule(at: at, sampleAction)
    }

    /// One cheap read of usage: a crossing (or a due full reading) wakes the monitor, which
    /// reschedules after its full reading; otherwise the next read is scheduled from this one.
    func sampleUsage() {
        guard isRunning, let usageSampling else { return }
        let now = loop.now
        switch usageSampling.sample(at: now) {
        case .wake(let hint, let signal, _):
            samples.add()
            transient.succeeded()
            wake(hint: hint, source: signal)
            if sampleDeadline == nil { scheduleSample(after: loop.now) }  // the full reading failed transiently
        case .quiet, .gone:
            samples.add()
            transient.succeeded()
            scheduleSample(after: now)
        case .failed(let error):
            fail(error)
        case .retry(let error):
            transient.failed(error, owing: nil, source: nil)
            scheduleSample(after: now)
        }
    }
}

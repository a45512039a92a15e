import MemwarnSystem

/// The proactive trim's decisions, one step at a time: pure logic, its time given.
///
/// At each step, for each trimmable consumer:
///
/// - under pressure (the level raised, or PSI `some` at the policy's stall mark) nothing is
///   lowered, and the refill rate is measured afresh once pressure is gone;
/// - after its refills rose, the consumer is left alone for ``holdSteps`` steps, twice as long
///   after each step down in a row that its refills answered at once (up to
///   ``longestHoldSteps``), so a load with nothing to spare is probed ever more rarely;
/// - a consumer warming up (with no ceiling, it grew by more than two steps' worth since the
///   last step, and refilled clearly slower than over the step before) is neither measured nor
///   trimmed;
/// - the first settled step measures the consumer's refills a second: the rate every step after
///   is judged by, until pressure or a rise with no ceiling has it measured again;
/// - when the consumer refilled clearly more than that rate predicts over a step (more than a
///   tenth more, and more than three times the square root of the prediction plus two, so that
///   a trickle of refills is not read as a rise), the steps took values the service still needs:
///   the ceiling goes back up by two steps and the consumer is held — and after the hold, while
///   the refills stay up, up again; a ceiling the consumer does not fill (``fills(_:_:)``) is
///   lifted instead;
/// - otherwise, when the consumer fills its ceiling (or has none), the ceiling goes down by
///   ``Settings/stepFraction`` of what it holds, never below ``inUseMargin`` times what it says
///   is in use.
struct TrimPlanner {
    struct Settings: Sendable, Hashable {
        /// The share of a consumer's footprint one step takes.
        var stepFraction: Double
        /// How long a step lasts (the refill rate is judged over it).
        var interval: Duration
    }

    /// A trimmable consumer as a step sees it.
    struct Observation: Sendable, Hashable {
        var id: ObjectIdentifier
        var footprintBytes: Int
        /// What it says is in use (`nil`: it does not say, and nothing is known to be).
        var inUseBytes: Int?
        var refillCount: Int
        var ceilingBytes: Int?
    }

    /// A new ceiling for a consumer.
    struct Change: Sendable, Hashable {
        enum Reason: Sendable, Hashable {
            /// A step down.
            case step
            /// Its refills rose: the ceiling goes back up.
            case refillsRose(expected: Double, refilled: Int)
            /// Its refills rose while it did not fill its ceiling: the ceiling is lifted.
            case lifted
        }
        /// What a change is, as the metric `memwarn_trim_steps_total` counts it.
        enum Outcome: String, CaseIterable, Sendable {
            case lowered
            case backedOff = "backed_off"
            case lifted
        }

        var outcome: Outcome {
            switch reason {
            case .step: .lowered
            case .refillsRose: .backedOff
            case .lifted: .lifted
            }
        }

        var id: ObjectIdentifier
        /// The new ceiling; `nil` lifts it.
        var ceilingBytes: Int?
        var reason: Reason
    }

    /// How many steps a consumer is left alone after its refills rose.
    static let holdSteps = 10
    /// The longest hold, in steps: ``holdSteps`` doubled five times. After a hold, one step down
    /// probes whether the consumer can now spare memory; when its refills rise again at once,
    /// the next hold is twice as long, so a load with nothing to spare costs a probe every 320
    /// intervals (32 minutes at 6 s), not every 10.
    static let longestHoldSteps = holdSteps << 5

    /// The hold after `failedProbes` steps down in a row whose refills rose at once (1 or more).
    static func holdSteps(afterFailedProbes failedProbes: Int) -> Int {
        min(longestHoldSteps, holdSteps << min(5, max(0, failedProbes - 1)))
    }
    /// A ceiling never goes below what a consumer says is in use, times this.
    static let inUseMargin = 1.05

    /// What the planner remembers of a consumer between steps.
    private struct Track {
        var refillCount: Int
        var footprintBytes: Int
        var at: ContinuousClock.Instant
        /// Refills a second the steps are judged by; `nil` until measured.
        var rate: Double?
        /// Refills a second over the step before (to tell a cache warming up).
        var lastRate: Double?
        var heldUntil: ContinuousClock.Instant?
        /// Whether the last change was a step down (so refills that rise now answer it).
        var lastChangeWasStep = false
        /// Steps down in a row that refills answered at once: each doubles the next hold.
        var failedProbes = 0
    }

    let settings: Settings
    private var tracks: [ObjectIdentifier: Track] = [:]

    init(settings: Settings) {
        self.settings = settings
    }

    /// One step: the new ceilings.
    ///
    /// - Parameters:
    ///   - now: the step's time.
    ///   - pressed: whether memory is under pressure now (the level raised, or PSI stalls).
    ///   - consumers: the trimmable consumers registered now.
    /// - Returns: the ceilings to set.
    mutating func step(at now: ContinuousClock.Instant, pressed: Bool, consumers: [Observation]) -> [Change] {
        let present = Set(consumers.map(\.id))
        tracks = tracks.filter { present.contains($0.key) }
        var changes: [Change] = []
        for consumer in consumers {
            guard var track = tracks[consumer.id] else {
                tracks[consumer.id] = Track(refillCount: consumer.refillCount, footprintBytes: consumer.footprintBytes, at: now)
                continue
            }
            let elapsed = (now - track.at).seconds
            guard elapsed > 0 else { continue }
            let refilled = max(0, consumer.refillCount - track.refillCount)
            let grew = consumer.footprintBytes - track.footprintBytes
            (track.refillCount, track.footprintBytes, track.at) = (consumer.refillCount, consumer.footprintBytes, now)
            let observed = Observed(refilled: refilled, elapsed: elapsed, grew: grew, rateBefore: track.lastRate)
            track.lastRate = Double(refilled) / elapsed
            if let change = decide(consumer, &track, observed, pressed: pressed, now: now) { changes.append(change) }
            tracks[consumer.id] = track
        }
        return changes
    }

    /// What a step saw of a consumer since the last.
    private struct Observed {
        var refilled: Int
        var elapsed: Double
        /// How much its footprint grew (negative: it shrank).
        var grew: Int
        /// Refills a second over the step before; `nil` on the first.
        var rateBefore: Double?

        /// Whether the consumer is past its warm-up: it grew by no more than `step` twice, or it
        /// refilled about as fast as over the step before (a cache filling for the first time
        /// refills fast, then ever slower; one that grows for ever with new keys refills steadily).
        func isSettled(step: Int) -> Bool {
            if grew <= 2 * step { return true }
            guard let rateBefore else { return false }
            let before = rateBefore * elapsed
            return Double(refilled) >= before * 0.9 - 3 * before.squareRoot() - 2
        }
    }

    private func decide(_ consumer: Observation, _ track: inout Track, _ observed: Observed, pressed: Bool, now: ContinuousClock.Instant) -> Change? {
        let change = plan(consumer, &track, observed, pressed: pressed, now: now)
        track.lastChangeWasStep = change?.reason == .step
        return change
    }

    private func plan(_ consumer: Observation, _ track: inout Track, _ observed: Observed, pressed: Bool, now: ContinuousClock.Instant) -> Change? {
        if pressed {
            track.rate = nil
            track.failedProbes = 0
            return nil
        }
        if let heldUntil = track.heldUntil, now < heldUntil { return nil }
        track.heldUntil = nil
        let footprint = max(0, consumer.footprintBytes)
        let step = max(1, Int(Double(footprint) * settings.stepFraction))
        guard let judgedBy = track.rate else {
            // Measured once settled: a cache warming up refills at a rate it will not keep.
            if consumer.ceilingBytes != nil || observed.isSettled(step: step) { track.rate = Double(observed.refilled) / observed.elapsed }
            return nil
        }
        let expected = judgedBy * observed.elapsed
        if Double(observed.refilled) > Self.noticeableRise(over: expected) {
            guard let ceiling = consumer.ceilingBytes else {
                track.rate = nil  // a rise with no ceiling of the trim's is the service's own
                track.failedProbes = 0
                return nil
            }
            if !Self.fills(footprint, ceiling) {
                // A ceiling it does not fill is not what it misses: lifted, and measured afresh.
                track.rate = nil
                track.failedProbes = 0
                return Change(id: consumer.id, ceilingBytes: nil, reason: .lifted)
            }
            // A rise that answers a step down is a failed probe, and each in a row doubles the
            // hold; one that comes after a hold, with no step, is held the base time.
            var hold = Self.holdSteps
            if track.lastChangeWasStep {
                track.failedProbes += 1
                hold = Self.holdSteps(afterFailedProbes: track.failedProbes)
            }
            track.heldUntil = now + settings.interval * hold
            let raised = ceiling.addingReportingOverflow(2 * step)
            return Change(
                id: consumer.id, ceilingBytes: raised.overflow ? .max : raised.partialValue,
                reason: .refillsRose(expected: expected, refilled: observed.refilled))
        }
        if track.lastChangeWasStep { track.failedProbes = 0 }  // the last step down held
        if let ceiling = consumer.ceilingBytes, !Self.fills(footprint, ceiling) { return nil }
        let held = min(footprint, consumer.ceilingBytes ?? .max)
        let inUse = min(max(0, consumer.inUseBytes ?? 0), footprint)
        let floor = min(footprint, Int((Double(inUse) * Self.inUseMargin).rounded(.up)))
        let next = max(1, floor, held - step)
        guard next < held else { return nil }
        return Change(id: consumer.id, ceilingBytes: next, reason: .step)
    }

    /// Whether a consumer fills its ceiling: holds at least 90 % of it. One that holds less (a
    /// release emptied it, its work shrank) is not held back by the ceiling: a step down would
    /// take nothing it holds, and a rise of its refills is not the ceiling's doing.
    static func fills(_ footprint: Int, _ ceiling: Int) -> Bool {
        Double(footprint) >= 0.9 * Double(ceiling)
    }

    /// The refills over a step above which they rose, when `expected` were due: more than a
    /// tenth above, and beyond what chance gives a count (about the square root of its
    /// expectation), so that a trickle of refills is not read as a rise.
    static func noticeableRise(over expected: Double) -> Double {
        max(expected * 1.1, expected + 3 * expected.squareRoot() + 2)
    }
}

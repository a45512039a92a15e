import Testing

@testable import MemwarnMonitor

/// The proactive trim's decisions, step by step, on given times and counts: it steps down while
/// refills hold, gives back and holds when they rise, stops under pressure, and never goes below
/// what a consumer says is in use.
struct TrimPlannerTests {
    static let interval = Duration.seconds(6)
    static let mebibyte = 1 << 20

    /// A planner and one consumer's figures, stepped on an injected clock.
    struct Run {
        var planner = TrimPlanner(settings: .init(stepFraction: 0.01, interval: TrimPlannerTests.interval))
        let start = ContinuousClock.now
        var steps = 0
        let id = ObjectIdentifier(Run.self)
        var footprint = 100 * TrimPlannerTests.mebibyte
        var inUse: Int?
        var refills = 0
        var ceiling: Int?

        /// One step `refilled` refills after the last; the consumer obeys the ceiling it is given.
        mutating func step(refilled: Int, pressed: Bool = false) -> TrimPlanner.Change? {
            steps += 1
            refills += refilled
            let observation = TrimPlanner.Observation(id: id, footprintBytes: footprint, inUseBytes: inUse, refillCount: refills, ceilingBytes: ceiling)
            let changes = planner.step(at: start + TrimPlannerTests.interval * steps, pressed: pressed, consumers: [observation])
            if let change = changes.first {
                ceiling = change.ceilingBytes
                footprint = min(footprint, change.ceilingBytes ?? .max)
            }
            return changes.first
        }
    }

    @Test func stepsDownOnePercentAStepWhileRefillsHold() {
        var run = Run()
        #expect(run.step(refilled: 0) == nil, "the first step only meets the consumer")
        #expect(run.step(refilled: 600) == nil, "the second measures the rate the next are judged by")
        var ceilings: [Int] = []
        for _ in 0..<5 {
            let change = run.step(refilled: 600)
            #expect(change?.reason == .step)
            ceilings.append(change?.ceilingBytes ?? -1)
        }
        var expected = 100 * Self.mebibyte
        for ceiling in ceilings {
            expected -= expected / 100
            #expect(ceiling == expected)
        }
    }

    @Test func refillsThatRiseGiveTwoStepsBackAndHoldTenStepsAndAgainWhileTheyStayUp() throws {
        var run = Run()
        _ = run.step(refilled: 0)
        _ = run.step(refilled: 600)
        let first = run.step(refilled: 600)
        let second = run.step(refilled: 620)
        #expect(first?.reason == .step)
        let lowered = try #require(second?.ceilingBytes, "a rise within chance is no rise")
        let rose = run.step(refilled: 900)
        let backOff = try #require(rose)
        #expect(backOff.reason == .refillsRose(expected: 600, refilled: 900))
        #expect(backOff.ceilingBytes == lowered + 2 * Int(Double(lowered) * 0.01))
        for _ in 0..<TrimPlanner.holdSteps - 1 { #expect(run.step(refilled: 900) == nil, "held") }
        let again = run.step(refilled: 900)
        #expect(again?.reason == .refillsRose(expected: 600, refilled: 900), "still up after the hold: up again")
        #expect((again?.ceilingBytes ?? 0) > (backOff.ceilingBytes ?? .max))
        for _ in 0..<TrimPlanner.holdSteps - 1 { _ = run.step(refilled: 600) }
        #expect(run.step(refilled: 600)?.reason == .step, "back at the rate before: steps down again")
    }

    /// Steps with `refilled` refills each until the planner changes the ceiling.
    ///
    /// - Returns: how many steps made no change, and the change.
    static func stepsUntilAChange(_ run: inout Run, refilled: Int, atMost: Int = 1000) -> (quiet: Int, change: TrimPlanner.Change?) {
        for quiet in 0..<atMost {
            if let change = run.step(refilled: refilled) { return (quiet, change) }
        }
        return (atMost, nil)
    }

    @Test func eachStepDownThatRefillsAnswerAtOnceDoublesTheNextHoldUpToTheLongest() {
        // A load with nothing to spare: every step down takes values still read.
        var run = Run()
        _ = run.step(refilled: 0)
        _ = run.step(refilled: 600)
        #expect(run.step(refilled: 600)?.reason == .step)
        var holds: [Int] = []
        for _ in 0..<8 {
            let answered = run.step(refilled: 900)
            #expect(answered?.reason == .refillsRose(expected: 600, refilled: 900))
            let probe = Self.stepsUntilAChange(&run, refilled: 600)
            #expect(probe.change?.reason == .step, "after each hold, one step down probes")
            holds.append(probe.quiet + 1)
        }
        let base = TrimPlanner.holdSteps
        #expect(holds == [base, 2 * base, 4 * base, 8 * base, 16 * base, 32 * base, 32 * base, 32 * base])
        #expect(TrimPlanner.longestHoldSteps == 32 * base)

        // A probe whose refills hold: the next step goes down too, and the hold after the next
        // step that refills answer is the shortest again.
        #expect(run.step(refilled: 600)?.reason == .step, "the probe held: another step down")
        #expect(run.step(refilled: 900)?.reason == .refillsRose(expected: 600, refilled: 900))
        #expect(Self.stepsUntilAChange(&run, refilled: 600).quiet + 1 == base)
    }

    @Test func aConsumerWarmingUpIsNeitherMeasuredNorTrimmed() {
        // Filling for the first time: it grows, and refills ever fewer new keys.
        var run = Run()
        run.footprint = 10 * Self.mebibyte
        _ = run.step(refilled: 0)
        for refilled in [8000, 4000, 2000, 1000, 500] {
            run.footprint += run.footprint / 10
            #expect(run.step(refilled: refilled) == nil, "growing 10 % a step, ever slower")
        }
        #expect(run.step(refilled: 100) == nil, "settled: measured")
        #expect(run.step(refilled: 100)?.reason == .step, "then trimmed, judged by the settled rate")
    }

    @Test func aConsumerGrowingForEverWithNewKeysIsTrimmed() {
        var run = Run()
        _ = run.step(refilled: 0)
        run.footprint += run.footprint / 10
        #expect(run.step(refilled: 3000) == nil, "growing, no rate before: not measured")
        run.footprint += run.footprint / 10
        #expect(run.step(refilled: 3000) == nil, "growing as steadily as it refills: measured")
        #expect(run.step(refilled: 3000)?.reason == .step)
    }

    @Test func aCeilingTheConsumerNoLongerFillsIsNotLoweredAndIsLiftedWhenRefillsRise() {
        var run = Run()
        _ = run.step(refilled: 0)
        _ = run.step(refilled: 100)
        #expect(run.step(refilled: 100)?.reason == .step)
        run.footprint /= 2  // a release emptied half of it
        #expect(run.step(refilled: 100) == nil, "a step down would take nothing it holds")
        let lifted = run.step(refilled: 2000)
        #expect(lifted?.reason == .lifted && lifted?.ceilingBytes == nil, "the ceiling is not what it misses")
    }

    @Test func aTrickleOfRefillsIsNotReadAsARise() {
        var run = Run()
        _ = run.step(refilled: 0)
        _ = run.step(refilled: 1)
        // 1 expected: up to 1 + 3 + 2 = 6 is chance.
        #expect(run.step(refilled: 5)?.reason == .step)
        #expect(run.step(refilled: 1)?.reason == .step)
    }

    @Test func pressureStopsTheTrimAndTheRateIsMeasuredAfresh() {
        var run = Run()
        _ = run.step(refilled: 0)
        _ = run.step(refilled: 100)
        #expect(run.step(refilled: 100)?.reason == .step)
        let ceiling = run.ceiling
        for _ in 0..<3 { #expect(run.step(refilled: 5000, pressed: true) == nil) }
        #expect(run.ceiling == ceiling, "pressure neither lowers nor raises the ceiling")
        #expect(run.step(refilled: 300) == nil, "the first calm step measures")
        #expect(run.step(refilled: 300)?.reason == .step)
    }

    @Test func neverBelowWhatTheConsumerSaysIsInUse() {
        var run = Run()
        run.inUse = 90 * Self.mebibyte
        _ = run.step(refilled: 0)
        _ = run.step(refilled: 0)
        var last = Int.max
        for _ in 0..<20 { if let change = run.step(refilled: 0) { last = change.ceilingBytes ?? .max } }
        let floor = Int((Double(90 * Self.mebibyte) * TrimPlanner.inUseMargin).rounded(.up))
        #expect(last == floor)
        #expect(run.step(refilled: 0) == nil, "at the floor, no more steps")
    }

    @Test func aRiseWithNoCeilingIsTheServicesOwnAndOnlyResetsTheRate() {
        var run = Run()
        _ = run.step(refilled: 0)
        _ = run.step(refilled: 10)  // measured: 10 a step
        #expect(run.step(refilled: 1000) == nil, "a rise before any ceiling: no step down, no ceiling raised")
        #expect(run.ceiling == nil)
        #expect(run.step(refilled: 1000) == nil, "the rate is measured afresh")
        #expect(run.step(refilled: 1000)?.reason == .step, "and 1000 a step is now the rate judged by: no rise")
    }

    @Test func aConsumerThatLeavesIsForgotten() {
        var planner = TrimPlanner(settings: .init(stepFraction: 0.01, interval: Self.interval))
        let start = ContinuousClock.now
        let one = TrimPlanner.Observation(id: ObjectIdentifier(Int.self), footprintBytes: 1000, inUseBytes: nil, refillCount: 0, ceilingBytes: nil)
        _ = planner.step(at: start, pressed: false, consumers: [one])
        _ = planner.step(at: start + Self.interval, pressed: false, consumers: [])
        // Back as new: met again, then measured, then stepped.
        #expect(planner.step(at: start + Self.interval * 2, pressed: false, consumers: [one]).isEmpty)
        #expect(planner.step(at: start + Self.interval * 3, pressed: false, consumers: [one]).isEmpty)
        #expect(planner.step(at: start + Self.interval * 4, pressed: false, consumers: [one]).first?.ceilingBytes == 990)
    }
}

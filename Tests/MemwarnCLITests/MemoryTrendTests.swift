import Foundation
import MemwarnTestKit
import Testing

@testable import MemwarnSoak

/// The soak's floor and leak verdict on series whose truth is known: flat, a steady leak,
/// a warm-up that flattens, a floor the allocator keeps while the heap stays flat, too little.
/// Noise comes from a seeded generator; each case is checked over 20 seeds.
@Suite struct MemoryTrendTests {
    static let mebibyte = 1_048_576.0
    static let limit: UInt64 = 256 << 20

    /// One floor sample a second for `seconds`: `floor(t)` MiB plus up to `noise` MiB of
    /// transient memory (requests in flight), the heap floor `heap(t)` likewise.
    static func samples(seconds: Int, seed: UInt64, noise: Double = 3, floor: (Double) -> Double, heap: ((Double) -> Double)? = nil) -> [MemoryTrend.Sample] {
        var generator = SeededGenerator(seed: seed)
        return (0..<seconds).map { second in
            let t = Double(second)
            let transient = Double.random(in: 0...noise, using: &generator) * mebibyte
            return MemoryTrend.Sample(
                seconds: t, floorBytes: UInt64(floor(t) * mebibyte + transient),
                heapFloorBytes: heap.map { UInt64($0(t) * mebibyte + transient) })
        }
    }

    @Test func aFlatFloorIsSteadyAtItsLevel() {
        for seed in 1...20 as ClosedRange<UInt64> {
            let trend = MemoryTrend.analyse(Self.samples(seconds: 600, seed: seed) { _ in 60 }, spanSeconds: 600, limitBytes: Self.limit, basis: "test")
            #expect(trend.verdict == .steady, "seed \(seed): \(trend.summary)")
            let floor = Double(trend.floorBytes ?? 0) / Self.mebibyte
            #expect(floor >= 60 && floor < 61.5, "the troughs sit at the floor, below the transient memory: \(floor)")
        }
    }

    @Test(arguments: [2.0, 4.0, 8.0])
    func aSteadyLeakIsLeakingAtItsRate(rate: Double) {
        for seed in 1...20 as ClosedRange<UInt64> {
            let trend = MemoryTrend.analyse(
                Self.samples(seconds: 600, seed: seed) { 60 + rate * $0 / 60 }, spanSeconds: 600, limitBytes: Self.limit, basis: "test")
            #expect(trend.verdict == .leaking, "seed \(seed): \(trend.summary)")
            let measured = trend.rateBytesPerMinute / Self.mebibyte
            #expect(abs(measured - rate) <= 0.1 * rate, "seed \(seed): \(measured) MiB/min for \(rate)")
            #expect(trend.confidence > 0.999)
        }
    }

    @Test func aFloorThatRisesThenFlattensIsWarmingUp() {
        for seed in 1...20 as ClosedRange<UInt64> {
            // 40 MiB more, reached with a time constant of two minutes (runtime caches, pools filling).
            let trend = MemoryTrend.analyse(
                Self.samples(seconds: 600, seed: seed) { 60 + 40 * (1 - exp(-$0 / 120)) }, spanSeconds: 600,
                limitBytes: Self.limit, basis: "test")
            #expect(trend.verdict == .warmingUp, "seed \(seed): \(trend.summary)")
        }
    }

    /// A cache capped at 32 MiB, in front of a working set that fits in it, fills as the load
    /// misses it: 32 MiB × (1 − e^(−t/30 s)), no memwarn (the floor is anonymous memory). In a
    /// 60 s soak its troughs still climb steadily (the old verdict: leaking); the second half at
    /// under half the first's rate is a cache filling, or a leak beside a warm-up: cannot tell yet.
    /// Five minutes see it flatten: warming up.
    @Test func aBoundedCacheFillingToItsCapIsNeverLeaking() {
        let filling = { (t: Double) in 20 + 32 * (1 - exp(-t / 30)) }
        for seed in 1...20 as ClosedRange<UInt64> {
            let short = MemoryTrend.analyse(
                Self.samples(seconds: 60, seed: seed, noise: 0.5, floor: filling), spanSeconds: 60, limitBytes: 64 << 20, basis: "anonymous memory")
            #expect(short.verdict == .cannotTellYet || short.verdict == .warmingUp, "seed \(seed): \(short.summary)")
            let long = MemoryTrend.analyse(
                Self.samples(seconds: 300, seed: seed, noise: 0.5, floor: filling), spanSeconds: 300, limitBytes: 64 << 20, basis: "anonymous memory")
            #expect(long.verdict == .warmingUp, "seed \(seed): \(long.summary)")
        }
        let trend = MemoryTrend.analyse(
            Self.samples(seconds: 60, seed: 1, noise: 0.5, floor: filling), spanSeconds: 60, limitBytes: 64 << 20, basis: "anonymous memory")
        #expect(trend.summary.hasPrefix("cannot tell yet (") && trend.summary.contains("slowing, not yet flat"), "\(trend.summary)")
        #expect(trend.secondHalfRateBytesPerMinute < trend.firstHalfRateBytesPerMinute * MemoryTrend.leakHoldsAt, "\(trend.summary)")
        #expect(trend.secondHalfRateBytesPerMinute >= trend.firstHalfRateBytesPerMinute / 3, "the old rule called this a leak: \(trend.summary)")
    }

    /// As the trial's capped NSCache read: a rise of 2.5 MiB/min in a 60 s soak under 40 MiB,
    /// just over the 2 MiB a rise must reach over the whole soak; its second half alone rises
    /// about 1 MiB: not a leak seen.
    @Test func aRiseBarelySeenOverTheSoakIsNotALeakWhenItsSecondHalfAloneIsTooSmall() {
        for seed in 1...20 as ClosedRange<UInt64> {
            let trend = MemoryTrend.analyse(
                Self.samples(seconds: 60, seed: seed, noise: 0.2) { 30 + 2.5 * $0 / 60 }, spanSeconds: 60, limitBytes: 40 << 20,
                basis: "anonymous memory")
            #expect(trend.verdict != .leaking, "seed \(seed): \(trend.summary)")
            if trend.verdict == .cannotTellYet { #expect(trend.summary.contains("too little in half the soak to see"), "\(trend.summary)") }
        }
    }

    /// An obvious leak still reads leaking in a 60 s soak: its rate holds, and its second half
    /// alone rises far more than a rise must.
    @Test func aFastSteadyLeakIsLeakingInASixtySecondSoak() {
        for seed in 1...20 as ClosedRange<UInt64> {
            let trend = MemoryTrend.analyse(
                Self.samples(seconds: 60, seed: seed) { 40 + 60 * $0 / 60 }, spanSeconds: 60, limitBytes: 128 << 20, basis: "test")
            #expect(trend.verdict == .leaking, "seed \(seed): \(trend.summary)")
        }
    }

    @Test func aRisingFloorWithAFlatHeapIsRetainedByTheAllocator() {
        for seed in 1...20 as ClosedRange<UInt64> {
            let trend = MemoryTrend.analyse(
                Self.samples(seconds: 600, seed: seed, floor: { 60 + 3 * $0 / 60 }, heap: { _ in 30 }), spanSeconds: 600,
                limitBytes: Self.limit, basis: "test")
            #expect(trend.verdict == .retainedByAllocator, "seed \(seed): \(trend.summary)")
            let leaking = MemoryTrend.analyse(
                Self.samples(seconds: 600, seed: seed, floor: { 60 + 3 * $0 / 60 }, heap: { 30 + 3 * $0 / 60 }), spanSeconds: 600,
                limitBytes: Self.limit, basis: "test")
            #expect(leaking.verdict == .leaking, "the heap rising with it is a leak: \(leaking.summary)")
        }
    }

    @Test func aLeakTooSlowForTheSoakIsNotCalledALeakAndTooLittleIsTooShort() {
        // 0.2 MiB/min for 60 s is 0.2 MiB: under the 2.56 MiB (1 % of 256 MiB) a rise must reach.
        let slow = MemoryTrend.analyse(
            Self.samples(seconds: 60, seed: 1, noise: 0.1) { 60 + 0.2 * $0 / 60 }, spanSeconds: 60, limitBytes: Self.limit, basis: "test")
        #expect(slow.verdict == .steady, "\(slow.summary)")
        #expect(slow.smallestVisibleRateBytesPerMinute > 2 * Self.mebibyte, "and the report says how slow a leak could hide: \(slow.summary)")
        let short = MemoryTrend.analyse(Self.samples(seconds: 15, seed: 1) { 60 + 60 * $0 / 60 }, spanSeconds: 15, limitBytes: Self.limit, basis: "test")
        #expect(short.verdict == .tooShort)
        #expect(MemoryTrend.analyse([], spanSeconds: 600, limitBytes: Self.limit, basis: "test").verdict == .tooShort)
    }

    @Test func theMannKendallConfidenceAndSensSlopeMatchHandWorkedValues() {
        let rising = (0..<10).map { MemoryTrend.Point(seconds: Double($0), bytes: UInt64($0 * 10)) }
        #expect(MemoryTrend.senSlope(rising) == 10)
        // S = 45 for 10 rising points, variance 125: z = 44 / sqrt(125) = 3.936, one-sided p = 4.1e-5.
        #expect(abs(MemoryTrend.risingConfidence(rising) - (1 - 4.14e-5)) < 1e-5)
        #expect(MemoryTrend.risingConfidence(rising.reversed().enumerated().map { .init(seconds: Double($0.offset), bytes: $0.element.bytes) }) == 0)
        let outlier = rising.enumerated().map { $0.offset == 5 ? MemoryTrend.Point(seconds: 5, bytes: 10_000) : $0.element }
        #expect(MemoryTrend.senSlope(outlier) == 10, "one outlier does not move the median slope")
    }
}

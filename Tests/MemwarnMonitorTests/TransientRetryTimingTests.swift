import CgroupKit
import MemwarnSystem
import MemwarnTestFixtures
import Testing

@testable import MemwarnMonitor

#if canImport(Glibc)
import Glibc
#endif

/// The transient retry's timing, on a manual clock: a reading that fails transiently is taken
/// again after a wait that doubles from 10 ms up to a second, and the wake it owed is decided
/// by the retry once reads work again — not by the next poll. (``TransientReadFaultTests`` runs
/// the same episodes on a running monitor in real time.)
struct TransientRetryTimingTests {
    static let limit: UInt64 = 128 << 20

    @Test func aFailedReadingIsRetriedAfterAWaitThatDoublesAndTheRetryDecides() throws {
        let host = try SyntheticHost(limit: Self.limit, usage: Self.limit / 2)
        let plan = ReadFaultPlan()
        var files = host.files
        files.faultPlan = plan
        var policy = PressurePolicy()
        policy.pollInterval = .seconds(30)
        let engine = try DrivenEngine(files: files, policy: policy)
        try engine.start()
        #expect(engine.level == .normal)
        // The limit file is read by every full reading, not by the sampler: the crossing's
        // reading fails, and so does each retry, while the plan stands.
        plan.fail(of: "/app/memory.max", with: ENFILE)
        try host.setUsage(0.85)
        var failedAt: [Duration] = []
        let began = engine.clock.now
        var seen = 0
        try engine.advance(
            until: {
                let forced = plan.forcedCount(of: "/memory.max")
                if forced > seen { (seen, failedAt) = (forced, failedAt + [engine.clock.now - began]) }
                return forced >= 6
            }, step: .milliseconds(1), "six failed readings")
        #expect(engine.level == .normal, "a failed read changes no level")
        #expect(engine.transientNotes.count >= 6 && engine.transientNotes.allSatisfy { $0 != nil })
        let gaps = zip(failedAt.dropFirst(), failedAt).map { $0 - $1 }
        #expect(gaps == [.milliseconds(10), .milliseconds(20), .milliseconds(40), .milliseconds(80), .milliseconds(160)], "\(failedAt)")
        plan.clear()
        let cleared = engine.clock.now
        try engine.advance(until: { engine.level == .warning }, step: .milliseconds(1), within: .seconds(2), "the warning")
        #expect(engine.clock.now - cleared == .milliseconds(320), "the next retry decides, 320 ms after the last failure's wait began")
        let warning = try #require(engine.events.last)
        #expect(warning.level == .warning && warning.source == .usageSample, "the owed wake's signal: \(warning.source)")
        #expect(engine.transientNotes.last == .some(nil), "the episode is reported over")
    }
}

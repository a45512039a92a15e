import CgroupKit
import MemwarnSystem
import MemwarnTestFixtures
import MemwarnTestKit
import MemwarnTestTraits
import Testing

@testable import MemwarnMonitor
@testable import MemwarnRelease

/// cgroup v1 as root: usage that rests on a threshold and goes up and down across it has the
/// kernel report a crossing at each of its checks. A threshold that fired is not listened to for
/// ``ThresholdPlanner/quietAfterFiring``, and what it reported meanwhile comes as one reading when
/// that ends. Real thresholds on a real cgroup, driven on a manual clock: the pause is the clock's.
@Suite(.serialized, .tags(.root, .cgroupV1), .needsRealCgroups)
struct ThresholdPauseTests {
    static let limit: UInt64 = 64 << 20
    /// Each move is 2 MiB (512 pages) across a threshold in its middle: the kernel, which checks
    /// its thresholds every 128 page events a CPU, checks it past the threshold in every move.
    static let swing = 2 << 20

    /// Up and down across the 55 % threshold 60 times, the clock moved 50 ms after each move:
    /// the kernel reports some of the crossings at once (each of its checks), and the readings
    /// they cause are ``ThresholdPlanner/quietAfterFiring`` apart at least. A crossing reported
    /// during a pause is read as the pause ends, exactly that long after the reading before.
    ///
    /// `onParent`: the limit is a parent's, and the hog and the monitor are in its child without
    /// a limit of its own: the thresholds are registered on the parent's usage (a slice's or a
    /// pod's limit, as root on v1), and paused the same way.
    @Test(arguments: [false, true]) func aThresholdCrossedOverAndOverIsReadOnceAPause(onParent: Bool) async throws {
        try await withTestCgroup(limit: Self.limit) { limited in
            let cgroup = onParent ? try limited.child("app") : limited
            defer { if onParent { try? cgroup.remove() } }  // before its parent, after the hog (defers run last first)
            let hog = try MemoryHog()
            defer { hog.terminate() }
            try cgroup.add(pid: hog.pid)
            let engine = try DrivenEngine(files: .host, cgroupPath: cgroup.location.directory)
            try engine.start()
            try engine.turn(until: { engine.usageWatch == .thresholds }, "the usage thresholds registered")
            // The 55 % threshold: far from every mark and guard band, where nothing samples usage.
            let threshold = Int(Double(Self.limit) * 0.55)
            let prefix = onParent ? "usage-threshold of \(limited.location.path) \(threshold) bytes" : "usage-threshold \(threshold) bytes"
            #expect(engine.sources.contains { $0.hasPrefix(prefix) }, "\(engine.sources)")
            // Half a swing below it, measured (the limited cgroup's usage, not the hog's alone).
            var held = try hog.hold(threshold - Int(try limited.usage()) - Self.swing / 2)
            held = try hog.hold(held.bytes + threshold - Int(try limited.usage()) - Self.swing / 2)
            try engine.advance(by: .seconds(1))  // the climb's own reports, done with
            let before = engine.readings.count
            for move in 0..<60 {
                held = try hog.hold(held.bytes + (move.isMultiple(of: 2) ? Self.swing : -Self.swing))
                try engine.advance(by: .milliseconds(50))
            }
            let read = engine.readings.dropFirst(before).filter { $0.event.source == .usageThreshold }.map(\.readAt)
            let gaps = zip(read, read.dropFirst()).map { $0.duration(to: $1) }
            #expect(read.count >= 10, "\(read.count) readings for 60 crossings")
            #expect(gaps.allSatisfy { $0 >= ThresholdPlanner.quietAfterFiring }, "readings closer than a pause: \(gaps)")
            #expect(gaps.contains(ThresholdPlanner.quietAfterFiring), "no crossing held back by a pause was read as it ended: \(gaps)")
            #expect(engine.level == .normal)
        }
    }
}

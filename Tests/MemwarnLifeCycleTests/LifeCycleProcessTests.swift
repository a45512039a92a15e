import CgroupKit
import Foundation
import Memwarn
import MemwarnTestKit
import MemwarnTestTraits
import Testing

/// The life cycle in a real child process (`memwarn-lifecycle-probe`, whose client sessions
/// are units): terminate-suspended under a real constrained cgroup, and a real SIGTERM.
@Suite(.serialized, .tags(.root, .cgroupV1), .needsRealCgroups)
struct LifeCycleProcessTests {
    static let mebibyte = 1 << 20
    static let probePath = ChildProcess.productsDirectory + "/memwarn-lifecycle-probe"

    /// Sessions by size (MiB) and the writes each acknowledges.
    static let suspended = [("big", 48, 300), ("mid", 32, 200), ("small", 16, 100)]
    static let active = [("hot", 40, 50), ("warm", 24, 25)]

    @Test func criticalPressureTerminatesOnlySuspendedUnitsLargestFirstUntilTheTargetAndRelaunchesLoseNothing() async throws {
        let limit: UInt64 = 256 << 20
        try await withTestCgroup(limit: limit) { cgroup in
            let probe = try JSONLineChild([Self.probePath, "--suspension-delay-ms", "20"], in: cgroup)
            defer { probe.stop() }
            for (id, mebibytes, writes) in Self.suspended + Self.active {
                #expect(try probe.send("unit \(id) \(mebibytes)")["state"] as? String == "active")
                #expect(try probe.send("write \(id) \(writes)")["acknowledged"] as? Int == writes)
            }
            for (id, _, _) in Self.suspended {
                #expect(try probe.send("suspend \(id)")["state"] as? String == "suspended")
            }
            #expect(try probe.send("watch")["watching"] as? String == "normal")

            // Unreleasable ballast takes usage past the critical mark (90 %) to 93 %. The active
            // sessions' working sets are in use (pinned), so only terminating can free enough.
            let ballast = Int(Double(limit) * 0.93) - Int(try cgroup.usage())
            #expect(ballast > 0)
            // The ballast's reply and the monitor's reports come in either order: read until
            // both the reply and the critical report have come.
            let isReport: ([String: Any]) -> Bool = { $0["entries"] != nil }
            let isCritical: ([String: Any]) -> Bool = { isReport($0) && $0["level"] as? String == "critical" }
            var line = try probe.send("ballast \(ballast)")
            var criticalReport = isCritical(line) ? line : nil
            var ballastAcknowledged = !isReport(line)
            while criticalReport == nil || !ballastAcknowledged {
                line = try probe.receive()
                if criticalReport == nil && isCritical(line) { criticalReport = line }
                if !isReport(line) { ballastAcknowledged = true }
            }
            let critical = try #require(criticalReport)

            let entries = try #require(critical["entries"] as? [[String: Any]])
            #expect(
                !entries.contains { ($0["tier"] as? String == "caches") && ($0["bytesFreed"] as? Int ?? 0) > 0 },
                "the active sessions' working sets are in use")
            // The target is usage back to the recovery mark, plus headroom for the growth the
            // monitor measured while the ballast climbed (it cannot know the climb stops there):
            // the part without headroom needs big and mid; the headroom, by how fast the
            // ballast went in, may need small too.
            let expected = try SuspendedTermination(report: critical, suspended: Self.suspended.map { ($0.0, $0.1 * Self.mebibyte) })
            let withoutHeadroom = expected.targetBytes - expected.headroomBytes
            #expect(
                withoutHeadroom > 48 * Self.mebibyte && withoutHeadroom <= 80 * Self.mebibyte,
                "without headroom, big alone was not enough; big and mid were")
            #expect(expected.units.count >= 2)
            let terminated = SuspendedTermination.terminations(in: critical)
            #expect(
                terminated.map(\.id) == expected.units.map(\.id),
                "largest first, and it stopped at the target (\(expected.targetBytes) bytes, \(expected.headroomBytes) of them headroom)")
            #expect(terminated.map(\.bytes) == expected.units.map(\.bytes))
            #expect(critical["metTarget"] as? Bool == expected.canMeetTarget, "met unless the headroom asked for more than all three hold")
            let terminatedIDs = Set(expected.units.map(\.id))

            // The monitor may release again on its own (another rise): its reports are skipped.
            let states = try probe.send("status", skipping: isReport).mapValues { ($0 as? String)?.split(separator: " ").first.map(String.init) }
            var expectedStates = ["hot": "active", "warm": "active"]
            for (id, _, _) in Self.suspended { expectedStates[id] = terminatedIDs.contains(id) ? "not-running" : "suspended" }
            #expect(states == expectedStates)
            #expect(Double(try cgroup.usage()) < Double(limit) * 0.8, "the memory went back to the kernel")

            // Asked for again: the suspended one resumes, the terminated ones relaunch from
            // their saved state; every acknowledged write is there. The suspended one first:
            // relaunching the others takes usage past the critical mark again, and a suspended
            // unit would then rightly be terminated, if the monitor got there first.
            for (id, _, writes) in Self.suspended.reversed() {
                let reply = try probe.send("activate \(id)", skipping: isReport)
                #expect(reply["state"] as? String == "active")
                #expect(reply["launches"] as? String == (terminatedIDs.contains(id) ? "2" : "1"))
                #expect(reply["present"] as? String == "\(writes)")
                #expect(reply["intact"] as? String == "true")
                #expect(reply["lost"] as? String == "0", "lost writes of \(id)")
            }
        }
    }

    /// The seeds: "When low memory occurs, the system calls `applicationDidReceiveMemoryWarning(_:)`
    /// … the app notifies its view controllers so they release what they can rebuild." Here the
    /// session (a unit) lets 96 MiB of scratch go on the warning; memwarn's release of the same
    /// warning reads usage after that, finds it below the recovery mark, and leaves the cache
    /// tier alone. With only the coordinator attached (the delegates not told), the same
    /// warning releases the cache.
    @Test(arguments: [true, false])
    func aUnitsDelegateDropsMemoryOnTheWarningBeforeAnyCacheTierIsTouched(applicationAttached: Bool) async throws {
        let limit: UInt64 = 256 << 20
        try await withTestCgroup(limit: limit) { cgroup in
            let probe = try JSONLineChild([Self.probePath], in: cgroup)
            defer { probe.stop() }
            #expect(try probe.send("unit alice 4 scratch=96")["state"] as? String == "active")
            #expect(try probe.send("cache 32")["cache"] as? Int == 32 * Self.mebibyte)
            #expect(try probe.send(applicationAttached ? "watch" : "watch coordinator")["watching"] as? String == "normal")

            // Unreleasable ballast takes usage past the warning mark (80 %) to 85 %.
            let ballast = Int(Double(limit) * 0.85) - Int(try cgroup.usage())
            #expect(ballast > 0)
            var lines = [try probe.send("ballast \(ballast)")]
            while !(lines.contains { $0["ballast"] != nil } && lines.contains { $0["entries"] != nil }) { lines.append(try probe.receive()) }

            let reportAt = try #require(lines.firstIndex { $0["entries"] != nil })
            let report = lines[reportAt]
            #expect(report["level"] as? String == "warning")
            let entries = try #require(report["entries"] as? [[String: Any]])
            let cacheFreed = entries.filter { $0["tier"] as? String == "caches" }.reduce(0) { $0 + ($1["bytesFreed"] as? Int ?? 0) }
            let cacheLeft = try #require(try probe.send("cache 0", skipping: { $0["entries"] != nil })["cache"] as? Int)
            if applicationAttached {
                let droppedAt = try #require(lines.firstIndex { $0["dropped"] != nil }, "the session was told: \(lines)")
                #expect(droppedAt < reportAt, "the delegate dropped before the release")
                #expect(lines[droppedAt]["dropped"] as? String == "\(96 * Self.mebibyte)")
                #expect(lines[droppedAt]["level"] as? String == "warning")
                #expect(cacheFreed == 0, "no cache tier touched: \(entries)")
                #expect(cacheLeft == 32 * Self.mebibyte, "the cache is whole")
                #expect(Double(try cgroup.usage()) < Double(limit) * 0.7, "the scratch went back to the kernel")
            } else {
                #expect(!lines.contains { $0["dropped"] != nil }, "not attached: the delegates are not told")
                #expect(cacheFreed > 0, "the release had to take from the cache: \(entries)")
                #expect(cacheLeft < 32 * Self.mebibyte)
            }
        }
    }

    /// `memwarn trigger warn` is a warning too: the delegates hear it before its release.
    @Test func aWarningOnRequestReachesTheDelegatesBeforeItsRelease() async throws {
        let probe = try JSONLineChild([Self.probePath])
        defer { probe.stop() }
        _ = try probe.send("unit alice 4 scratch=8")
        let socket = try #require(try probe.send("watch")["socket"] as? String)
        #expect(!socket.isEmpty, "the probe's control endpoint is up")
        let reply = try ControlClient.send(.warn(level: .critical, targetBytes: 0), to: socket)
        guard case .released(_, let pid, _) = reply else {
            Issue.record("a warn request got \(reply)")
            return
        }
        #expect(pid == probe.pid)
        let (report, lines) = try probe.receive(until: { $0["entries"] != nil && $0["level"] as? String == "critical" })
        let dropped = try #require(lines.first { $0["dropped"] != nil }, "the session was told before the release: \(lines)")
        #expect(dropped["level"] as? String == "critical")
        #expect(report["targetBytes"] as? Int == 0)
    }

    @Test func sigtermRunsWillTerminateForRunningUnitsOnlyCutsOffAnOverrunAndExitsCleanly() async throws {
        let probe = try JSONLineChild([Self.probePath, "--termination-deadline-ms", "500", "--suspension-delay-ms", "20"])
        defer { probe.stop() }
        _ = try probe.send("unit a 4")
        _ = try probe.send("unit b 4 overrun")
        _ = try probe.send("unit c 4")
        #expect(try probe.send("suspend c")["state"] as? String == "suspended")
        _ = try probe.send("serve")  // the application's launch callbacks come first
        _ = try probe.receive(until: { $0["serving"] as? Bool == true })

        #expect(kill(probe.pid, SIGTERM) == 0)
        let (exited, lines) = try probe.receive(until: { $0["exited"] != nil }, timeout: .seconds(30))
        let told = lines.filter { $0["callback"] as? String == "willTerminate" }.compactMap { $0["subject"] as? String }
        #expect(Set(told) == ["unit a", "unit b", "application"])
        #expect(!told.contains("unit c"), "a suspended unit is not told")
        let overran = lines.filter { $0["handler"] as? String == "willTerminate" }
        #expect(overran.map { $0["subject"] as? String } == ["unit b"])
        #expect((overran.first?["outcome"] as? String)?.contains("overran") == true)
        #expect(exited["exited"] as? String == "clean")
        #expect(probe.stop() == 0, "a clean exit status")
    }
}

import CgroupKit
import Testing

@testable import MemwarnMonitor

/// The backstop of a coordinated limit, on injected time: a crossing the agent leaves
/// unanswered counts again after the bound, an answered one stays with the agent until the
/// critical mark, and the crossing ends under the recovery mark (default marks: 70/80/90 %).
struct AgentLeaseBackstopTests {
    static let limit: UInt64 = 1000
    /// The watched cgroup: its own limit is never left to an agent.
    static let own = "/pod/app"

    static func parent(at usage: UInt64) -> MemoryConstraint {
        MemoryConstraint(cgroupPath: "/pod", usageBytes: usage, limit: EffectiveLimit(bytes: limit, file: "memory.max", cgroupPath: "/pod"))
    }

    static func leased(agentPid: Int32 = 4242, at now: ContinuousClock.Instant) -> AgentLeases {
        let leases = AgentLeases(policy: PressurePolicy())
        leases.grant(cgroupPath: "/pod", agentPid: agentPid, for: .seconds(60), now: now)
        return leases
    }

    @Test func anUnansweredCrossingIsLeftToTheAgentForTheBoundThenCounts() {
        let start = ContinuousClock.now
        let leases = Self.leased(at: start)
        #expect(leases.leftToAgent([Self.parent(at: 500)], excluding: Self.own, now: start) == ["/pod"])
        #expect(leases.nextBackstopCheck() == nil, "no crossing: nothing to look at")
        #expect(leases.leftToAgent([Self.parent(at: 850)], excluding: Self.own, now: start + .milliseconds(10)) == ["/pod"])
        #expect(leases.nextBackstopCheck() == start + .milliseconds(10) + AgentLeases.answerBound)
        #expect(leases.leftToAgent([Self.parent(at: 850)], excluding: Self.own, now: start + .milliseconds(900)) == ["/pod"])
        #expect(
            leases.leftToAgent([Self.parent(at: 850)], excluding: Self.own, now: start + .milliseconds(1010)).isEmpty, "unanswered for the bound: it counts")
        #expect(leases.countedAgain == ["/pod"] && leases.nextBackstopCheck() == nil)
        // Counted until back under the recovery mark (between the marks it still counts).
        #expect(leases.leftToAgent([Self.parent(at: 750)], excluding: Self.own, now: start + .milliseconds(1100)).isEmpty)
        #expect(leases.leftToAgent([Self.parent(at: 690)], excluding: Self.own, now: start + .milliseconds(1200)) == ["/pod"])
        #expect(leases.countedAgain.isEmpty)
    }

    @Test func anAskAnswersTheCrossingUntilTheCriticalMark() {
        let start = ContinuousClock.now
        let leases = Self.leased(at: start)
        #expect(leases.leftToAgent([Self.parent(at: 820)], excluding: Self.own, now: start) == ["/pod"])
        leases.noteAsk(agentPid: 4242, now: start + .milliseconds(30))
        #expect(leases.nextBackstopCheck() == nil, "answered")
        #expect(leases.leftToAgent([Self.parent(at: 880)], excluding: Self.own, now: start + .seconds(5)) == ["/pod"], "answered: left to the agent")
        #expect(leases.leftToAgent([Self.parent(at: 900)], excluding: Self.own, now: start + .seconds(5)).isEmpty, "the critical mark counts at once")
    }

    @Test func anAskJustBeforeTheCrossingAnswersItButAnOldOneOrAnotherAgentsDoesNot() {
        let start = ContinuousClock.now
        let leases = Self.leased(at: start)
        leases.noteAsk(agentPid: 4242, now: start)
        #expect(leases.leftToAgent([Self.parent(at: 820)], excluding: Self.own, now: start + .milliseconds(100)) == ["/pod"])
        #expect(
            leases.leftToAgent([Self.parent(at: 820)], excluding: Self.own, now: start + .seconds(3)) == ["/pod"], "the agent read the parent first and asked")

        let later = Self.leased(at: start)
        later.noteAsk(agentPid: 4242, now: start)
        later.noteAsk(agentPid: 999, now: start + .seconds(2))  // not the leasing agent: ignored
        #expect(later.leftToAgent([Self.parent(at: 820)], excluding: Self.own, now: start + .seconds(2)) == ["/pod"])
        #expect(later.leftToAgent([Self.parent(at: 820)], excluding: Self.own, now: start + .seconds(4)).isEmpty, "the ask was older than the lead: unanswered")
    }

    @Test func withoutALeaseNothingIsLeftAndNothingIsHeld() {
        let leases = AgentLeases(policy: PressurePolicy())
        #expect(leases.isEmpty)
        #expect(leases.leftToAgent([Self.parent(at: 950)], excluding: Self.own).isEmpty)
        leases.grant(cgroupPath: "/pod", agentPid: 4242, for: .seconds(60))
        #expect(!leases.isEmpty)
        leases.revoke(cgroupPath: "/pod")
        #expect(leases.isEmpty, "every reading of an uncoordinated service skips the lock")
    }

    @Test func aLeaseThatEndsTakesItsCrossingWithIt() {
        let start = ContinuousClock.now
        let leases = Self.leased(at: start)
        _ = leases.leftToAgent([Self.parent(at: 850)], excluding: Self.own, now: start)
        leases.revoke(cgroupPath: "/pod")
        #expect(leases.nextBackstopCheck() == nil)
        #expect(leases.leftToAgent([Self.parent(at: 850)], excluding: Self.own, now: start).isEmpty, "no lease: it counts as any limit")
    }
}

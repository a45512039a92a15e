import MemwarnRelease
import Testing

@testable import MemwarnAgent

/// Whom the agent asks next, and how often: pure steps on given instants.
struct AskPacingTests {
    static let mebibyte: UInt64 = 1 << 20
    static let smallest = 2 * mebibyte
    static let start = ContinuousClock.now

    static func service(_ pid: Int32, usage: UInt64, gives: UInt64?, atCritical: UInt64? = nil) -> AskPacing.Candidate {
        AskPacing.Candidate(
            pid: pid, usageBytes: usage * mebibyte, canGive: gives.map { .init(atWarning: $0 * mebibyte, atCritical: (atCritical ?? $0) * mebibyte) })
    }

    static func at(_ milliseconds: Int) -> ContinuousClock.Instant { start + .milliseconds(milliseconds) }

    @Test func theLargestIsAskedFirstAndOneThatSaysItHoldsNothingIsNotAsked() {
        var pacing = AskPacing()
        let services = [Self.service(1, usage: 40, gives: 10), Self.service(2, usage: 90, gives: 1), Self.service(3, usage: 60, gives: nil)]
        // 2 is the largest but holds less than a release is worth; 3 has not said yet: asked on its usage.
        #expect(
            pacing.next(among: services, level: .warning, needBytes: 30 * Self.mebibyte, smallestRelease: Self.smallest, now: Self.at(0))
                == .ask(pid: 3, level: .warning))
        pacing.asked(3, at: .warning, now: Self.at(0))
        #expect(
            pacing.next(among: services, level: .warning, needBytes: 30 * Self.mebibyte, smallestRelease: Self.smallest, now: Self.at(1))
                == .ask(pid: 1, level: .warning))
    }

    @Test func atCriticalEveryServiceIsAskedAtWarningBeforeAnyIsAskedAtCritical() {
        var pacing = AskPacing()
        let services = [Self.service(1, usage: 90, gives: 10, atCritical: 50), Self.service(2, usage: 40, gives: 10, atCritical: 30)]
        var asked: [AskPacing.Step] = []
        for step in 0..<4 {
            let next = pacing.next(among: services, level: .critical, needBytes: 100 * Self.mebibyte, smallestRelease: Self.smallest, now: Self.at(step))
            asked.append(next)
            if case .ask(let pid, let level) = next { pacing.asked(pid, at: level, now: Self.at(step)) }
        }
        #expect(
            asked == [.ask(pid: 1, level: .warning), .ask(pid: 2, level: .warning), .ask(pid: 1, level: .critical), .ask(pid: 2, level: .critical)])
    }

    /// However the parent reads, one service is asked at warning at most every 250 ms and at
    /// critical at most every second: over ten seconds of a parent that never comes down (and a
    /// service that can always give what it needs), with every ask freeing plenty (no back-off),
    /// 41 warning asks at most and 11 critical.
    @Test func aServiceIsAskedAFewTimesASecondAtMostWhateverHappens() {
        var pacing = AskPacing()
        let services = [Self.service(7, usage: 100, gives: 50)]
        var asks: [MemoryPressureLevel: Int] = [:]
        for millisecond in stride(from: 0, through: 10_000, by: 1) {
            for level in [MemoryPressureLevel.warning, .critical] {
                let now = Self.at(millisecond)
                guard
                    case .ask(let pid, let asked) = pacing.next(
                        among: services, level: level, needBytes: 40 * Self.mebibyte, smallestRelease: Self.smallest, now: now)
                else { continue }
                pacing.asked(pid, at: asked, now: now)
                pacing.answered(pid, at: asked, freedBytes: Int64(40 * Self.mebibyte), holding: services[0].canGive, smallestRelease: Self.smallest, now: now)
                asks[asked, default: 0] += 1
            }
        }
        #expect((asks[.warning] ?? 0) <= 41 && (asks[.warning] ?? 0) >= 35, "\(asks)")
        #expect((asks[.critical] ?? 0) <= 11, "\(asks)")
    }

    /// An ask that freed less than a release is worth doubles that service's wait, up to 30 s;
    /// one that freed enough brings it back to 250 ms.
    @Test func leanAsksDoubleTheWaitUpToThirtySecondsAndAGoodOneEndsIt() {
        var pacing = AskPacing()
        let services = [Self.service(4, usage: 100, gives: 50)]
        var times: [Int] = []
        var millisecond = 0
        while millisecond < 120_000 {
            if case .ask(let pid, let level) = pacing.next(
                among: services, level: .warning, needBytes: 40 * Self.mebibyte, smallestRelease: Self.smallest, now: Self.at(millisecond))
            {
                pacing.asked(pid, at: level, now: Self.at(millisecond))
                pacing.answered(pid, at: level, freedBytes: 0, holding: services[0].canGive, smallestRelease: Self.smallest, now: Self.at(millisecond))
                times.append(millisecond)
            }
            millisecond += 10
        }
        let waits = zip(times.dropFirst(), times).map { $0 - $1 }
        #expect(waits.prefix(7) == [500, 1_000, 2_000, 4_000, 8_000, 16_000, 30_000], "\(waits)")
        #expect(waits.dropFirst(7).allSatisfy { $0 == 30_000 }, "\(waits)")
        // A good answer: back to the shortest wait.
        pacing.answered(
            4, at: .warning, freedBytes: Int64(10 * Self.mebibyte), holding: services[0].canGive, smallestRelease: Self.smallest, now: Self.at(millisecond))
        #expect(
            pacing.next(among: services, level: .warning, needBytes: 40 * Self.mebibyte, smallestRelease: Self.smallest, now: Self.at(millisecond + 250))
                == .ask(pid: 4, level: .warning))
    }

    @Test func aServiceThatSaysItHoldsMoreAfterALeanAskMayBeAskedAgainSoon() {
        var pacing = AskPacing()
        pacing.asked(4, at: .warning, now: Self.at(0))
        for _ in 0..<4 {
            pacing.answered(4, at: .warning, freedBytes: 0, holding: .init(atWarning: 0, atCritical: 0), smallestRelease: Self.smallest, now: Self.at(0))
        }
        let refilled = [Self.service(4, usage: 100, gives: 3)]  // 3 MiB more than when it gave nothing
        #expect(
            pacing.next(among: refilled, level: .warning, needBytes: 2 * Self.mebibyte, smallestRelease: Self.smallest, now: Self.at(200))
                == .wait(until: Self.at(4_000)))
        #expect(
            pacing.next(among: refilled, level: .warning, needBytes: 2 * Self.mebibyte, smallestRelease: Self.smallest, now: Self.at(250))
                == .ask(pid: 4, level: .warning))
    }

    @Test func aServiceThatDidNotAnswerIsLeftOutForThirtySeconds() {
        var pacing = AskPacing()
        let services = [Self.service(9, usage: 100, gives: nil), Self.service(2, usage: 10, gives: 5)]
        pacing.asked(9, at: .warning, now: Self.at(0))
        pacing.unanswered(9, now: Self.at(2_000))
        #expect(pacing.leftOut(now: Self.at(31_999)) == [9])
        #expect(
            pacing.next(among: services, level: .warning, needBytes: 50 * Self.mebibyte, smallestRelease: Self.smallest, now: Self.at(2_001))
                == .ask(pid: 2, level: .warning))
        pacing.asked(2, at: .warning, now: Self.at(2_001))
        #expect(
            pacing.next(among: services, level: .warning, needBytes: 50 * Self.mebibyte, smallestRelease: Self.smallest, now: Self.at(2_100))
                == .wait(until: Self.at(2_251)))
        #expect(
            pacing.next(among: services, level: .warning, needBytes: 50 * Self.mebibyte, smallestRelease: Self.smallest, now: Self.at(32_000))
                == .ask(pid: 9, level: .warning))
    }

    /// Over a parent held above its mark by memory no service holds, one ask, then none: not when
    /// the service's cache refills (it could not relieve the parent), but when the services could
    /// give enough together, when the level rises, when a service is found, or once the press ends.
    @Test func whenNobodyCanRelieveTheParentTheAgentStopsAskingUntilSomethingChanges() {
        var pacing = AskPacing()
        let need = 60 * Self.mebibyte
        var services = [Self.service(5, usage: 30, gives: 0)]
        #expect(pacing.next(among: services, level: .warning, needBytes: need, smallestRelease: Self.smallest, now: Self.at(0)) == .nothingToGive)
        // Traffic refills its cache: 20 MiB to give, far from the 60 the parent needs.
        services = [Self.service(5, usage: 50, gives: 20)]
        for second in 1...30 {
            #expect(
                pacing.next(among: services, level: .warning, needBytes: need, smallestRelease: Self.smallest, now: Self.at(second * 1_000)) == .nothingToGive)
        }
        // The level rises to critical: asked (at warning first).
        #expect(
            pacing.next(among: services, level: .critical, needBytes: need, smallestRelease: Self.smallest, now: Self.at(31_000))
                == .ask(pid: 5, level: .warning))
        pacing.asked(5, at: .warning, now: Self.at(31_000))
        pacing.answered(
            5, at: .warning, freedBytes: Int64(20 * Self.mebibyte), holding: .init(atWarning: 0, atCritical: 0), smallestRelease: Self.smallest,
            now: Self.at(31_001))
        let emptied = [Self.service(5, usage: 30, gives: 0)]
        #expect(pacing.next(among: emptied, level: .warning, needBytes: need, smallestRelease: Self.smallest, now: Self.at(32_000)) == .nothingToGive)
        // A service found: asked.
        let joined = emptied + [Self.service(6, usage: 10, gives: nil)]
        #expect(
            pacing.next(among: joined, level: .warning, needBytes: need, smallestRelease: Self.smallest, now: Self.at(33_000)) == .ask(pid: 6, level: .warning))
        // Enough to give together: asked again.
        var again = AskPacing()
        #expect(again.next(among: emptied, level: .warning, needBytes: need, smallestRelease: Self.smallest, now: Self.at(0)) == .nothingToGive)
        #expect(
            again.next(among: [Self.service(5, usage: 90, gives: 61)], level: .warning, needBytes: need, smallestRelease: Self.smallest, now: Self.at(500))
                == .ask(pid: 5, level: .warning))
        // The press ended: the next one starts afresh.
        var ended = AskPacing()
        #expect(ended.next(among: emptied, level: .warning, needBytes: need, smallestRelease: Self.smallest, now: Self.at(0)) == .nothingToGive)
        ended.pressEnded()
        #expect(
            ended.next(among: [Self.service(5, usage: 50, gives: 20)], level: .warning, needBytes: need, smallestRelease: Self.smallest, now: Self.at(500))
                == .ask(pid: 5, level: .warning))
    }

    /// While the services together cannot give what the parent needs, each is asked once in the
    /// press: a cache that traffic refills (each ask frees plenty, so no back-off) is not asked
    /// again every 250 ms for a parent it cannot relieve; it is once they could, together.
    @Test func whileTheServicesTogetherCannotRelieveTheParentEachIsAskedOnceAPress() {
        var pacing = AskPacing()
        let need = 100 * Self.mebibyte
        var asks = 0
        for millisecond in stride(from: 0, through: 10_000, by: 10) {
            // Refilled at 10 MiB/s since the last ask: 2.5 MiB after 250 ms, never the 100 needed.
            let refilled = [Self.service(5, usage: 40, gives: UInt64(10 + millisecond % 1_000 / 100))]
            guard
                case .ask(let pid, let level) = pacing.next(
                    among: refilled, level: .warning, needBytes: need, smallestRelease: Self.smallest, now: Self.at(millisecond))
            else { continue }
            asks += 1
            pacing.asked(pid, at: level, now: Self.at(millisecond))
            pacing.answered(pid, at: level, freedBytes: Int64(10 * Self.mebibyte), holding: nil, smallestRelease: Self.smallest, now: Self.at(millisecond))
        }
        #expect(asks == 1, "\(asks) asks in 10 s")
        // Together they could (a second service, or enough refilled): asked again.
        #expect(
            pacing.next(among: [Self.service(5, usage: 90, gives: 101)], level: .warning, needBytes: need, smallestRelease: Self.smallest, now: Self.at(10_500))
                == .ask(pid: 5, level: .warning))
    }

    /// Two services being asked (a slow one, and the one asked beside it), the third with nothing
    /// to give: the agent waits for their answers; it does not say that nobody can give.
    @Test func whileAsksAreUnderWayNobodyElseToAskIsAWaitNotNothingToGive() {
        var pacing = AskPacing()
        let services = [Self.service(1, usage: 150, gives: 100), Self.service(2, usage: 90, gives: 60), Self.service(3, usage: 45, gives: 0)]
        #expect(
            pacing.next(among: services, busy: [1, 2], level: .warning, needBytes: 30 * Self.mebibyte, smallestRelease: Self.smallest, now: Self.at(0))
                == .waitForAnswers)
        #expect(
            pacing.next(among: services, level: .warning, needBytes: 30 * Self.mebibyte, smallestRelease: Self.smallest, now: Self.at(1))
                == .ask(pid: 1, level: .warning))
    }

    @Test func aFailedSocketIsAskedAgainSoonThenLessOftenUpToFiveSeconds() {
        let delays = (1...7).map { ServiceRoster.retryDelay(afterFailures: $0) }
        #expect(delays == [.milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2), .seconds(4), .seconds(5), .seconds(5)])
    }

    @Test func theServicesKeptFitTheDescriptorLimitWithRoomForTheRest() {
        #expect(ServiceRoster.maximumServices(descriptorLimit: 1_024) == 464)
        #expect(ServiceRoster.maximumServices(descriptorLimit: 64) == 1)
    }
}

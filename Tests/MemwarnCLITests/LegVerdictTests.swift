import MemwarnSystem
import Testing

@testable import MemwarnSoak

/// A soak leg's verdict, decided from what it recorded with no I/O: how it ended and why it could
/// not be carried out, on constructed facts and reports (no cgroup, no child).
@Suite struct LegVerdictTests {
    /// A command's leg that got ready, whose `--duration` of 60 s was due 62 s after the start,
    /// stopped for `reason`.
    static func facts(
        _ reason: SoakLeg.Reason, serviceEnded: Bool = false, setupFailure: LegSetupFailure? = nil, loadRan: Duration? = nil,
        isCommand: Bool = true
    ) -> LegStopFacts {
        LegStopFacts(
            commandName: "./my-service", isCommand: isCommand, loadCommand: "./load.sh", limitBytes: 64 << 20, reason: reason,
            serviceEnded: serviceEnded, setupFailure: setupFailure, loadRan: loadRan, durationDueSeconds: isCommand ? 62 : nil,
            finishWindow: .seconds(6))
    }

    /// The run's report: ended with `exit` after `seconds`, OOM-killed `oomKills` times.
    static func report(_ exit: ProcessExit, after seconds: Double, oomKills: UInt64 = 0) -> ConstrainedRunReport {
        ConstrainedRunReport(
            command: ["./my-service"], cgroup: "/x", memoryMaxBytes: 64 << 20, memoryHighBytes: nil, exit: exit, exitCode: exit.code,
            oomKills: oomKills, peakUsageBytes: nil, warnings: [:], levelChanges: [], durationSeconds: seconds, cgroupRemoved: true,
            samples: [])
    }

    @Test func aServiceThatExitsZeroWithinTheFinishWindowFinishedAndEarlierItIsAProblem() {
        let finished = LegVerdict(Self.facts(.serviceExited, serviceEnded: true), exit: Self.report(ProcessExit(status: 0), after: 56.5))
        #expect(finished == LegVerdict(end: .finished, problem: nil), "62 s due, 6 s window: 56.5 s is the end")
        let early = LegVerdict(Self.facts(.serviceExited, serviceEnded: true), exit: Self.report(ProcessExit(status: 0), after: 55.5))
        #expect(early.end == .serviceExited)
        #expect(
            early.problem
                == "./my-service exited with status 0 after 55.5 s, 6.5 s before the soak's end: a soaked service must run until it is stopped (or give --duration that ends first)"
        )
        let crashed = LegVerdict(Self.facts(.serviceExited, serviceEnded: true), exit: Self.report(ProcessExit(status: 3), after: 20))
        #expect(crashed == LegVerdict(end: .serviceExited, problem: nil), "a crash is an outcome, not bad input")
        let killed = LegVerdict(Self.facts(.serviceExited, serviceEnded: true), exit: Self.report(ProcessExit(signal: 9), after: 20, oomKills: 1))
        #expect(killed == LegVerdict(end: .serviceExited, problem: nil))
        let demo = LegVerdict(Self.facts(.serviceExited, serviceEnded: true, isCommand: false), exit: Self.report(ProcessExit(status: 0), after: 21))
        #expect(demo == LegVerdict(end: .serviceExited, problem: nil), "the demo ends itself")
    }

    @Test func aLoadThatFailsWithinThreeSecondsIsABrokenSetupAndLaterItIsTheEnd() {
        let atOnce = Self.facts(.loadEnded(2), loadRan: .seconds(1))
        let expected = LegVerdict(
            end: .loadFailed, problem: "the load command failed at once: it exited with status 2 within 3.0 s of its start (`./load.sh`)")
        #expect(LegVerdict(stopping: atOnce) == expected, "no check runs")
        #expect(LegVerdict(atOnce, exit: Self.report(ProcessExit(signal: 15), after: 4)) == expected)
        #expect(LegVerdict(stopping: Self.facts(.loadEnded(2), loadRan: .seconds(4))) == LegVerdict(end: .loadEnded, problem: nil))
        #expect(LegVerdict(stopping: Self.facts(.loadEnded(0), loadRan: .seconds(1))) == LegVerdict(end: .loadEnded, problem: nil))
        #expect(
            LegVerdict(stopping: Self.facts(.loadEnded(127), setupFailure: .loadCouldNotStart("the load command could not start: ENOENT")))
                == LegVerdict(end: .loadFailed, problem: "the load command could not start: ENOENT"))
        #expect(LegVerdict(stopping: Self.facts(.duration)) == LegVerdict(end: .duration, problem: nil))
        #expect(LegVerdict(stopping: Self.facts(.interrupted(2))) == LegVerdict(end: .interrupted, problem: nil))
    }

    @Test func aServiceNeverReadySaysWhetherItWasOOMKilledOrEndedByItself() {
        let slow = Self.facts(.duration, setupFailure: .notReady("./my-service did not answer in time", endedBeforeReady: false))
        #expect(
            LegVerdict(slow, exit: Self.report(ProcessExit(signal: 15), after: 61))
                == LegVerdict(end: .notReady, problem: "./my-service did not answer in time"))
        let oom = Self.facts(.serviceExited, serviceEnded: true, setupFailure: .notReady("./my-service ended before it was ready", endedBeforeReady: true))
        #expect(
            LegVerdict(oom, exit: Self.report(ProcessExit(signal: 9), after: 0.4, oomKills: 1))
                == LegVerdict(end: .notReady, problem: "./my-service was OOM-killed before it was ready: 64.0 MiB is below what it needs to start"))
        #expect(
            LegVerdict(oom, exit: Self.report(ProcessExit(status: 3), after: 1.5))
                == LegVerdict(
                    end: .notReady,
                    problem: "./my-service exited with status 3 1.5 s after it started, before it was ready: a soaked service must run until it is stopped"))
    }
}

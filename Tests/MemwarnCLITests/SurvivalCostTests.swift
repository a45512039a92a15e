import Foundation
import MemwarnSystem
import Testing

@testable import MemwarnSoak

/// What surviving a limit cost, on series whose truth is known: the
/// service's release counters and its `/metrics` a second apart, time given, not slept.
@Suite struct SurvivalCostTests {
    static let mebibyte = 1 << 20

    /// The counters of a service that releases `rate(t)` times a second, 4 MiB and 2 ms a release,
    /// read once a second from `0` to `seconds`; it serves 800 requests a second and misses its
    /// cache on one lookup in five.
    static func figures(seconds: Int, rate: (Int) -> Int) -> ServiceTelemetry {
        var figures = ServiceTelemetry()
        figures.linksMemwarn = true
        var releases = 0
        for second in 0...seconds {
            if second > 0 { releases += rate(second) }
            let t = Double(second)
            figures.releaseSamples.append(
                .init(seconds: t, releases: releases, freedBytes: releases * 4 * mebibyte, releaseSeconds: Double(releases) * 0.002))
            figures.requestSamples.append(.init(seconds: t, value: 800 * t))
            figures.cacheSamples.append(.init(seconds: t, hits: 400 * t, misses: 100 * t))
        }
        return figures
    }

    @Test func theFiguresAreTheServicesOwnOverTheLoadedSpan() throws {
        // Ready at 10 s, stopped at 110 s: the counters before and after are not the loaded service's.
        let cost = SurvivalCost.of(Self.figures(seconds: 120) { $0 <= 10 || $0 > 110 ? 50 : 2 }, from: 10, until: 110)
        #expect(cost.seconds == 100)
        #expect(abs((cost.releasesPerSecond ?? 0) - 2) < 1e-9, "\(cost)")
        #expect(abs((cost.releasedBytesPerMinute ?? 0) - Double(2 * 4 * Self.mebibyte * 60)) < 1, "\(cost)")
        #expect(abs((cost.releasingShare ?? 0) - 0.004) < 1e-9, "2 releases of 2 ms a second: \(cost)")
        #expect(abs((cost.requestsPerSecond ?? 0) - 800) < 1e-9 && abs((cost.cacheMissRate ?? 0) - 0.2) < 1e-9, "\(cost)")
        let thrashing = try #require(cost.thrashing, "releases every second for 100 s")
        #expect(thrashing.fromSeconds == 0 && thrashing.seconds == 100 && abs(thrashing.releasesPerSecond - 2) < 1e-9, "\(thrashing)")
    }

    @Test func releasesEverySecondForLessThanAMinuteOrWithGapsAreNotThrashing() {
        // 50 s of 5 a second, then quiet: a burst.
        #expect(SurvivalCost.of(Self.figures(seconds: 120) { $0 <= 50 ? 5 : 0 }, from: 0, until: 120).thrashing == nil)
        // Two minutes, one second in three without a release: not every second.
        #expect(SurvivalCost.of(Self.figures(seconds: 120) { $0 % 3 == 0 ? 0 : 3 }, from: 0, until: 120).thrashing == nil)
        // The longest stretch is the one reported: 30 s, a gap, then 70 s.
        let cost = SurvivalCost.of(Self.figures(seconds: 120) { $0 <= 30 || $0 > 32 && $0 <= 102 ? 1 : 0 }, from: 0, until: 120)
        #expect(cost.thrashing?.fromSeconds == 32 && cost.thrashing?.seconds == 70, "\(String(describing: cost.thrashing))")
    }

    @Test func whatTheServiceDoesNotReportIsUnknownNotZero() {
        var unreported = SurvivalCost()
        (unreported.loadedSeconds, unreported.thrashingWindowSeconds) = (60, 30)  // the soak's own clock: known
        #expect(SurvivalCost.of(ServiceTelemetry(), from: 0, until: 60) == unreported)
        #expect(SurvivalCost().phrases.isEmpty && !SurvivalCost().isThrashing)
        var figures = Self.figures(seconds: 60) { _ in 1 }
        figures.requestSamples = []
        figures.cacheSamples = [.init(seconds: 0, hits: 0, misses: 0), .init(seconds: 60, hits: 0, misses: 0)]
        let cost = SurvivalCost.of(figures, from: 0, until: 60)
        #expect(cost.requestsPerSecond == nil && cost.cacheMissRate == nil, "no counter, no lookup: \(cost)")
        // A counter that went back (the service restarted its count) gives no throughput.
        figures.requestSamples = [.init(seconds: 0, value: 900), .init(seconds: 60, value: 10)]
        #expect(SurvivalCost.of(figures, from: 0, until: 60).requestsPerSecond == nil)
    }

    @Test func theRequestAndCacheCountersAreReadFromAPrometheusPage() {
        let page = """
            # HELP http_requests_total Requests served.
            http_requests_total{route="/a"} 100
            http_requests_total{route="/b"} 23
            service_requests_shed_total 7
            jobs_processed_total 5
            thumbnails_cache_hits_total 40
            thumbnails_cache_misses_total 10
            """
        #expect(ServiceWatch.requestCounters(in: page, names: []) == ["http_requests_total": 123], "a shed counter is not a request served")
        #expect(ServiceWatch.requestCounters(in: page, names: ["jobs_processed_total"]) == ["jobs_processed_total": 5])
        #expect(ServiceWatch.counters(in: page) { $0.hasSuffix("_cache_misses_total") } == ["thumbnails_cache_misses_total": 10])
    }

    // MARK: With several limits: each limit's cost, and a limit recommended with a margin

    static func run(limit: UInt64, survived: Bool, thrashing: Bool) -> SoakRun {
        var run = SoakReportReadingTests.run(memwarn: true, limit: limit, survived: survived)
        run.cost = SurvivalCost.of(Self.figures(seconds: 120) { second in thrashing ? 29 : (second % 4 == 0 ? 1 : 0) }, from: 0, until: 120)
        return run
    }

    @Test func theRecommendedLimitIsTheLowestSurvivedWithoutThrashingPlusItsMarginNamedAsSuch() throws {
        let mebibyte: UInt64 = 1 << 20
        let limits = [48 * mebibyte, 128 * mebibyte, 192 * mebibyte]
        let report = SoakReport(
            subject: "./my-service", memoryMaxBytes: limits[0], limits: limits, durationSeconds: 120,
            runs: [Self.run(limit: limits[0], survived: true, thrashing: true), Self.run(limit: limits[1], survived: true, thrashing: false)])
        #expect(report.lowestSurvivingLimit(memwarnEnabled: true) == limits[0], "it survived 48 MiB…")
        #expect(report.lowestComfortableLimit == limits[1], "…only by thrashing")
        #expect(report.recommendedLimit == 160 * mebibyte, "128 MiB plus 25 %")
        let text = report.text
        #expect(text.contains("recommended limit, with a 25 % margin: 160.0 MiB"), "\(text)")
        #expect(text.contains("YES: 120 s of releases every second"), "each limit's cost beside its outcome: \(text)")
        #expect(text.contains("cost with memwarn at 48.0 MiB: 29.00 releases/s"), "\(text)")
        let json = try SoakReportReadingTests.json(report)
        let recommended = try #require(json["recommendedLimit"] as? [String: Any])
        #expect(recommended["bytes"] as? Int == Int(160 * mebibyte) && recommended["marginPercent"] as? Int == 25, "\(recommended)")
        let runs = try #require(json["runs"] as? [[String: Any]])
        #expect((runs[0]["cost"] as? [String: Any])?["thrashing"] != nil && (runs[1]["cost"] as? [String: Any])?["thrashing"] == nil)
        // Every limit survived only by thrashing: no recommendation, and the report says why.
        let thrashed = SoakReport(
            subject: "./my-service", memoryMaxBytes: limits[0], limits: limits, durationSeconds: 120,
            runs: limits.map { Self.run(limit: $0, survived: true, thrashing: true) })
        #expect(thrashed.recommendedLimit == nil && thrashed.text.contains("no recommended limit"), "\(thrashed.text)")
        #expect(try SoakReportReadingTests.json(thrashed)["recommendedLimit"] == nil)
    }

    // MARK: Thrashing judged on a window the run can hold

    @Test func theThrashingWindowIsHalfTheLoadedSpanAtMostAMinuteAndNoneUnder40Seconds() {
        #expect(SurvivalCost.thrashingWindow(loadedSeconds: 60) == 30, "the default 60 s soak judges on 30 s")
        #expect(SurvivalCost.thrashingWindow(loadedSeconds: 120) == 60 && SurvivalCost.thrashingWindow(loadedSeconds: 3_600) == 60)
        #expect(SurvivalCost.thrashingWindow(loadedSeconds: 40) == 20)
        #expect(SurvivalCost.thrashingWindow(loadedSeconds: 39.9) == nil && SurvivalCost.thrashingWindow(loadedSeconds: 0) == nil)
    }

    @Test func aSixtySecondSoakFlagsReleasesEverySecondForMostOfItAndNotABurst() throws {
        // Ready at 0, stopped at 60: the caches fill for 10 s, then 4 releases a second to the end.
        // The old rule (a whole minute of them) could never flag this in a 60 s soak.
        let cost = SurvivalCost.of(Self.figures(seconds: 60) { $0 <= 10 ? 0 : 4 }, from: 0, until: 60)
        #expect(cost.thrashingWindowSeconds == 30 && cost.judgesThrashing)
        let thrashing = try #require(cost.thrashing, "50 s of releases every second in a 60 s soak: \(cost)")
        #expect(thrashing.fromSeconds == 10 && thrashing.seconds == 50, "\(thrashing)")
        #expect(cost.phrases.contains { $0.hasPrefix("THRASHING") && $0.contains("30 s window") }, "the report says which window: \(cost.phrases)")
        // 25 s of them, then quiet: a burst, under the 30 s window.
        #expect(SurvivalCost.of(Self.figures(seconds: 60) { $0 <= 25 ? 4 : 0 }, from: 0, until: 60).thrashing == nil)
    }

    @Test func aRunTooShortToJudgeThrashingSaysSoAndRecommendsNothing() throws {
        let short = SurvivalCost.of(Self.figures(seconds: 30) { _ in 4 }, from: 0, until: 30)
        #expect(short.thrashing == nil && !short.judgesThrashing && short.loadedSeconds == 30, "\(short)")
        #expect(short.phrases.contains { $0.contains("too short to judge thrashing") }, "\(short.phrases)")
        let mebibyte: UInt64 = 1 << 20
        let limits = [13 * mebibyte, 25 * mebibyte]
        var runs = limits.map { Self.run(limit: $0, survived: true, thrashing: false) }
        for index in runs.indices { runs[index].cost = short }
        let report = SoakReport(subject: "./my-service", memoryMaxBytes: limits[0], limits: limits, durationSeconds: 30, runs: runs)
        #expect(report.lowestSurvivingLimit(memwarnEnabled: true) == limits[0], "it survived…")
        #expect(report.recommendedLimit == nil, "…too briefly to recommend anything from it")
        let text = report.text
        #expect(text.contains("no recommended limit: the run at 13.0 MiB was loaded 30 s, too short to judge thrashing"), "\(text)")
        #expect(text.contains("too short to judge") && !text.contains("recommended limit, with"), "\(text)")
        let json = try SoakReportReadingTests.json(report)
        #expect(json["recommendedLimit"] == nil)
        #expect((json["noRecommendedLimit"] as? String ?? "").contains("too short to judge thrashing"), "\(json)")
        let cost = try #require((json["runs"] as? [[String: Any]])?.first?["cost"] as? [String: Any])
        #expect(cost["thrashingWindowSeconds"] == nil && cost["loadedSeconds"] as? Double == 30, "\(cost)")
        // A 60 s run at the larger limit, judged and not thrashing, is recommended from.
        runs[1].cost = SurvivalCost.of(Self.figures(seconds: 60) { $0 % 4 == 0 ? 1 : 0 }, from: 0, until: 60)
        let judged = SoakReport(subject: "./my-service", memoryMaxBytes: limits[0], limits: limits, durationSeconds: 60, runs: runs)
        #expect(judged.recommendedLimit == 32 * mebibyte, "25 MiB plus 25 %, rounded up to a MiB: \(judged.text)")
        #expect(judged.text.contains("no (30 s window)"), "\(judged.text)")
    }

    @Test func aLimitSurvivedOnlyByThrashingIsNotComfortable() {
        #expect(!Self.run(limit: 1 << 26, survived: true, thrashing: true).survivedComfortably)
        #expect(Self.run(limit: 1 << 26, survived: true, thrashing: false).survivedComfortably)
        #expect(!Self.run(limit: 1 << 26, survived: false, thrashing: false).survivedComfortably)
    }
}

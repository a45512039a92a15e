package import Foundation
import MemwarnSystem

extension SoakReport {
    /// The report as one JSON object (`memwarn soak --json`).
    package func json() throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return String(decoding: try encoder.encode(JSONForm(self)), as: UTF8.self)
    }

    /// Every run's samples as one JSON object (`memwarn soak --samples FILE`): usage every
    /// 100 ms, and the floor samples once a second, for an analysis of your own.
    package func samplesJSON() throws -> Data {
        struct Run: Encodable {
            var label: String
            var memoryMaxBytes: UInt64
            var usage: [SoakSample]
            var floorSamples: [MemoryTrend.Sample]
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return try encoder.encode([
            "runs": runs.map { Run(label: $0.label, memoryMaxBytes: $0.memoryMaxBytes, usage: $0.run.samples, floorSamples: $0.service.floorSamples) }
        ])
    }

    /// The JSON: the verdict first, and each run without its samples (they are for the plot).
    private struct JSONForm: Encodable {
        var passed: Bool
        var subject: String
        /// Only for one limit: with several, each run's is its own.
        var memoryMaxBytes: UInt64?
        var limits: [UInt64]
        /// `memwarn` and `baseline`, each `null` when no such run survived (or none ran); when
        /// memwarn was not in the service, `memwarn` is `null` (no run had it) and
        /// `withoutMemwarn` is the lowest the runs made with memwarn on survived.
        var lowestSurvivingLimit: [String: UInt64?]
        /// With several limits: the lowest survived with memwarn without thrashing, plus the margin.
        var recommendedLimit: RecommendedLimit?
        /// With several limits and none recommended, why (``SoakReport/noRecommendation``).
        var noRecommendedLimit: String?
        var durationSeconds: Double
        var interruptedBy: Int32?
        var problem: String?
        var memwarnInService: Bool
        var runs: [Run]

        struct RecommendedLimit: Encodable {
            var bytes: UInt64
            var lowestWithoutThrashingBytes: UInt64
            var marginPercent: Int
            /// What ran at it: `with memwarn`, or `without memwarn` (memwarn was not in the service).
            var ran: String
        }

        struct Run: Encodable {
            var label: String
            /// What ran, as its column is headed (``SoakReport/ranName(_:)``).
            var ran: String
            var memwarnEnabled: Bool
            var memoryMaxBytes: UInt64
            var survived: Bool
            var end: String
            var problem: String?
            var killedAfterSeconds: Double?
            var readyAfterSeconds: Double?
            var exitCode: Int32
            var oomKills: UInt64
            var warnings: [String: Int]
            var peakUsageBytes: UInt64?
            var linksMemwarn: Bool
            var releases: Int
            var releasedBytesByTier: [String: Int]
            var releasedBytesByConsumer: [String: Int]
            var exhaustedSeconds: Double
            /// The shedding counters summed, when that is a count (``CounterSum``).
            var shed: Double?
            /// Why the shedding counters summed are no count (`the service's counters sum to
            /// more than 2^53`): `shed` is then absent.
            var shedUnreadable: String?
            var loadExitCode: Int32?
            var checkExitCode: Int32?
            var killedAtStop: Bool
            var stall: MemoryStall?
            var unitsTerminated: Int
            var exhaustions: Int
            /// The demo's usage right after the release that found nothing more to give, on its
            /// first exhaustion (not the trend's floor, ``MemoryTrend/floorBytes``).
            var exhaustedFloorBytes: Int?
            /// The most memory the service's consumers said was in use at one answer of its
            /// endpoint, and by whom.
            var peakInUse: ServiceTelemetry.InUsePeak?
            var turnedAway: Int
            var forecastWarnings: Int?
            var falseForecasts: Int?
            var killReason: String?
            var writesAcknowledged: Int?
            var writesVerified: Int?
            var lostWrites: Int?
            var trend: MemoryTrend
            /// The trend in one line, with the reason for a verdict it could not give.
            var trendSummary: String
            var cost: SurvivalCost
        }

        init(_ report: SoakReport) {
            passed = report.passed
            subject = report.subject
            memoryMaxBytes = report.limits.count == 1 ? report.memoryMaxBytes : nil
            limits = report.limits
            let lowestWithMemwarnOn = report.lowestSurvivingLimit(memwarnEnabled: true)
            lowestSurvivingLimit = [
                "memwarn": report.memwarnInService ? lowestWithMemwarnOn : nil, "baseline": report.lowestSurvivingLimit(memwarnEnabled: false),
            ]
            if !report.memwarnInService { lowestSurvivingLimit["withoutMemwarn"] = .some(lowestWithMemwarnOn) }
            recommendedLimit = report.recommendedLimit.flatMap { bytes in
                report.lowestComfortableLimit.map {
                    RecommendedLimit(
                        bytes: bytes, lowestWithoutThrashingBytes: $0, marginPercent: Int(SoakReport.recommendedMargin * 100), ran: report.memwarnRunsName)
                }
            }
            noRecommendedLimit = report.noRecommendation
            durationSeconds = report.durationSeconds
            interruptedBy = report.interruptedBy
            problem = report.problem?.description
            memwarnInService = report.memwarnInService
            runs = report.runs.map { run in
                let demo = run.demo
                return Run(
                    label: run.label, ran: report.ranName(run), memwarnEnabled: run.memwarnEnabled, memoryMaxBytes: run.memoryMaxBytes, survived: run.survived,
                    end: run.end.rawValue, problem: run.problem, killedAfterSeconds: run.killedAfterSeconds, readyAfterSeconds: run.readyAfterSeconds,
                    exitCode: run.run.exitCode, oomKills: run.run.oomKills, warnings: run.run.warnings, peakUsageBytes: run.run.peakUsageBytes,
                    linksMemwarn: run.service.linksMemwarn, releases: demo.map { $0.releases.count } ?? run.service.releases,
                    releasedBytesByTier: run.releasedByTier, releasedBytesByConsumer: run.service.releasedBytesByConsumer,
                    exhaustedSeconds: run.service.exhaustedSeconds, shed: run.service.shed?.count, shedUnreadable: run.service.shed?.reason(),
                    loadExitCode: run.loadExitCode,
                    checkExitCode: run.checkExitCode, killedAtStop: run.killedAtStop, stall: run.stall, unitsTerminated: demo?.terminations.count ?? 0,
                    exhaustions: demo?.exhaustions.count ?? 0, exhaustedFloorBytes: demo?.exhaustions.first?.floorBytes, peakInUse: run.service.peakInUse,
                    turnedAway: demo?.turnedAway ?? 0,
                    forecastWarnings: demo?.forecastWarnings ?? (run.service.linksMemwarn ? run.service.forecastWarnings : nil),
                    falseForecasts: demo?.falseForecasts ?? (run.service.linksMemwarn ? run.service.falseForecasts : nil),
                    killReason: run.killReason, writesAcknowledged: demo?.writesAcknowledged, writesVerified: demo?.writesVerified,
                    lostWrites: demo?.lostWrites, trend: run.trend, trendSummary: run.trend.summary, cost: run.cost)
            }
        }
    }
}

import Foundation
import MemwarnSystem
import Testing

@testable import MemwarnSoak

#if canImport(FoundationXML)
import FoundationXML
#endif

/// The soak's report, its JSON and its plot as a newcomer reads them:
/// what they say must be what happened, and every row must be explained in the soak article.
@Suite struct SoakReportReadingTests {
    static let mebibyte: UInt64 = 1 << 20

    /// A run of a command (not the demo) at `limit`: survived, or OOM-killed after 5 s.
    static func run(memwarn: Bool, limit: UInt64, survived: Bool, linksMemwarn: Bool = true) -> SoakRun {
        let exit = survived ? ProcessExit(signal: SIGTERM) : ProcessExit(signal: SIGKILL)
        let report = ConstrainedRunReport(
            command: ["./my-service"], cgroup: "/x", memoryMaxBytes: limit, memoryHighBytes: nil, exit: exit, exitCode: exit.code,
            oomKills: survived ? 0 : 1, peakUsageBytes: limit / 2, warnings: ["warning": 1], levelChanges: [],
            durationSeconds: survived ? 60 : 5, cgroupRemoved: true, samples: [])
        var figures = ServiceTelemetry()
        figures.linksMemwarn = linksMemwarn
        if linksMemwarn && memwarn {
            figures.releases = 3
            figures.releasedBytesByTier = ["caches": 3 << 20]
            figures.releasedBytesByConsumer = ["entries": 3 << 20]
        }
        return SoakRun(
            label: memwarn ? "memwarn" : "baseline", memwarnEnabled: memwarn, memoryMaxBytes: limit, run: report, demo: nil, service: figures,
            trend: MemoryTrend.analyse([], spanSeconds: 60, limitBytes: limit, basis: "anonymous memory"), end: survived ? .duration : .serviceExited)
    }

    static func json(_ report: SoakReport) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(report.json().utf8)) as? [String: Any])
    }

    // MARK: The JSON

    @Test func withSeveralLimitsTheJSONHasNoTopLevelLimitAndTheLowestSurvivingLimitsAreExplicit() throws {
        let limits = [128 * Self.mebibyte, 192 * Self.mebibyte]
        let report = SoakReport(
            subject: "./my-service", memoryMaxBytes: limits[0], limits: limits, durationSeconds: 60,
            runs: [
                Self.run(memwarn: true, limit: limits[0], survived: false), Self.run(memwarn: false, limit: limits[0], survived: false),
                Self.run(memwarn: true, limit: limits[1], survived: true), Self.run(memwarn: false, limit: limits[1], survived: false),
            ])
        let json = try Self.json(report)
        #expect(json["memoryMaxBytes"] == nil, "with several limits a top-level limit would be only the first: each run has its own")
        #expect(json["limits"] as? [Int] == limits.map(Int.init))
        let lowest = try #require(json["lowestSurvivingLimit"] as? [String: Any])
        #expect(lowest["memwarn"] as? Int == Int(limits[1]))
        #expect(lowest.keys.contains("baseline") && lowest["baseline"] is NSNull, "no baseline survived: an explicit null, not a missing key: \(lowest)")
    }

    @Test func withOneLimitTheJSONKeepsItsLimitAtTheTopLevel() throws {
        let limit = 128 * Self.mebibyte
        let report = SoakReport(
            subject: "./my-service", memoryMaxBytes: limit, limits: [limit], durationSeconds: 60,
            runs: [Self.run(memwarn: true, limit: limit, survived: true)])
        let json = try Self.json(report)
        #expect(json["memoryMaxBytes"] as? Int == Int(limit))
        let lowest = try #require(json["lowestSurvivingLimit"] as? [String: Any])
        #expect(lowest["memwarn"] as? Int == Int(limit) && lowest["baseline"] is NSNull, "\(lowest)")
    }

    // MARK: Every row of the report is in the article's list

    /// The soak article's text.
    static func article() throws -> String {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        return try String(contentsOf: root.appendingPathComponent("Sources/Memwarn/Docs.docc/SoakYourOwnService.md"), encoding: .utf8)
    }

    @Test func everyRowOfTheReportIsExplainedInTheArticlesLineByLineList() throws {
        let limit = 128 * Self.mebibyte
        var memwarn = Self.run(memwarn: true, limit: limit, survived: true)
        memwarn.loadExitCode = 0
        memwarn.checkExitCode = 0
        memwarn.killedAtStop = true
        memwarn.stall = try JSONDecoder().decode(MemoryStall.self, from: Data(#"{"source":"system","someSeconds":0.5,"fullSeconds":0.1}"#.utf8))
        memwarn.cost = SurvivalCost.of(SurvivalCostTests.figures(seconds: 120) { _ in 2 }, from: 0, until: 120)
        let report = SoakReport(
            subject: "./my-service", memoryMaxBytes: limit, limits: [limit], durationSeconds: 60,
            runs: [memwarn, Self.run(memwarn: false, limit: limit, survived: false)])
        // The table: from the line after the title's blank line to the next blank line.
        let lines = report.text.split(separator: "\n", omittingEmptySubsequences: false)
        let table = lines.dropFirst(3).prefix { !$0.isEmpty }
        let names = table.map { line in
            // A row's name is its first column: up to the first run of 3 spaces.
            String(line.components(separatedBy: "   ").first ?? "").trimmingCharacters(in: .whitespaces)
        }
        #expect(names.contains("load exit status") && names.contains("check") && names.contains("stopped"), "\(names)")
        #expect(["releases/s", "released/min", "time releasing", "throughput", "cache miss rate", "thrashing"].allSatisfy(names.contains), "\(names)")
        // The article's list names each row in bold: **name**, or a tier's as **released: TIER**.
        let article = try Self.article()
        let list = try #require(article.range(of: "The report, line by line").map { String(article[$0.upperBound...]) })
        let bold = Set(
            list.components(separatedBy: "**").enumerated().filter { $0.offset % 2 == 1 }.flatMap { $0.element.components(separatedBy: ", ") })
        for name in names {
            let listed = name.hasPrefix("released: ") ? "released: TIER" : name
            #expect(bold.contains(listed), "the article's list of the report's rows does not explain \"\(name)\"")
        }
    }

    // MARK: The plot's title never cuts the command

    /// The texts of an SVG's elements, failing on XML that does not parse.
    final class Texts: NSObject, XMLParserDelegate {
        var texts: [String] = []
        func parser(_ parser: XMLParser, foundCharacters string: String) { texts.append(string) }
    }

    @Test func thePlotsTitleShowsTheWholeCommandAndCutsNoNumber() throws {
        let command = "./build/release/my-service --config /etc/my-service/production.yaml --threads 8 --port 18080"
        let limit = 192 * Self.mebibyte
        let report = SoakReport(
            subject: command, memoryMaxBytes: limit, limits: [limit], durationSeconds: 60, runs: [Self.run(memwarn: true, limit: limit, survived: true)])
        let parser = XMLParser(data: Data(SoakPlot.svg(report).utf8))
        let texts = Texts()
        parser.delegate = texts
        #expect(parser.parse())
        let words = texts.texts.joined(separator: " ").split(separator: " ").map(String.init)
        #expect(words.contains("18080"), "the port whole: \(texts.texts.prefix(3))")
        for word in command.split(separator: " ") { #expect(words.contains(String(word)), "\(word) is in the title whole") }
        #expect(SoakPlot.wrap("aaa bbb ccc", width: 7) == ["aaa bbb", "ccc"])
        #expect(SoakPlot.wrap("a-word-longer-than-the-line b", width: 5) == ["a-word-longer-than-the-line", "b"], "a word is never cut")
    }

    // MARK: memwarn is never credited with a survival it was not in

    @Test func aServiceMemwarnWasNotInIsNeverSaidToHaveSurvivedWithMemwarn() throws {
        let limit = 64 * Self.mebibyte
        let survived = SoakReport(
            subject: "/bin/sleep 600", memoryMaxBytes: limit, limits: [limit], durationSeconds: 60,
            runs: [
                Self.run(memwarn: true, limit: limit, survived: true, linksMemwarn: false),
                Self.run(memwarn: false, limit: limit, survived: false, linksMemwarn: false),
            ])
        let text = survived.text
        #expect(!text.contains("with memwarn the service survived"), "\(text)")
        #expect(!text.contains("without memwarn it did not"), "the baseline's end is not memwarn's doing either: \(text)")
        #expect(text.contains("memwarn was not in the service"), "\(text)")
        #expect(try Self.json(survived)["memwarnInService"] as? Bool == false)
        let killed = SoakReport(
            subject: "/bin/sleep 600", memoryMaxBytes: limit, limits: [limit], durationSeconds: 60,
            runs: [Self.run(memwarn: true, limit: limit, survived: false, linksMemwarn: false)])
        #expect(!killed.text.contains("with memwarn the service"), "\(killed.text)")
        #expect(killed.text.contains("memwarn was not in the service"), "\(killed.text)")
        // One that links memwarn keeps the credit.
        let linked = SoakReport(
            subject: "./my-service", memoryMaxBytes: limit, limits: [limit], durationSeconds: 60, runs: [Self.run(memwarn: true, limit: limit, survived: true)])
        #expect(linked.text.contains("PASS: with memwarn the service survived"), "\(linked.text)")
    }

    /// As the trial met it: `--limits` and `--no-baseline`, a service memwarn is not in. The
    /// columns, the notes, the recommendation and the JSON name what ran: the service without
    /// memwarn, never "with memwarn".
    @Test func aReportOfAServiceWithoutMemwarnNamesItsColumnsAndLinesForWhatRan() throws {
        let limits = [24 * Self.mebibyte, 40 * Self.mebibyte]
        let runs = limits.map { limit in
            var run = Self.run(memwarn: true, limit: limit, survived: limit == limits[1], linksMemwarn: false)
            run.cost = SurvivalCost.of(ServiceTelemetry(), from: 0, until: 60)  // loaded 60 s: judged
            return run
        }
        let report = SoakReport(subject: "./vapor-service", memoryMaxBytes: limits[0], limits: limits, durationSeconds: 60, runs: runs)
        let text = report.text
        #expect(!text.contains("with memwarn"), "\(text)")
        let lines = text.split(separator: "\n").map(String.init)
        #expect(lines[1].contains("without memwarn (not in the service) @ 24.0 MiB"), "the header (blank lines are split away): \(text)")
        #expect(lines.contains { $0.hasPrefix("trend without memwarn: ") }, "\(text)")
        #expect(lines.contains("lowest limit survived: without memwarn 40.0 MiB"), "\(text)")
        #expect(
            lines.contains { $0.hasPrefix("recommended limit, with a 25 % margin, for the service without memwarn: 50.0 MiB") },
            "recommended as what it is: \(text)")
        let json = try Self.json(report)
        let lowest = try #require(json["lowestSurvivingLimit"] as? [String: Any])
        #expect(lowest["memwarn"] is NSNull && lowest["withoutMemwarn"] as? Int == Int(limits[1]), "no run had memwarn in it: \(lowest)")
        #expect((json["recommendedLimit"] as? [String: Any])?["ran"] as? String == "without memwarn", "\(json)")
        #expect(
            (json["runs"] as? [[String: Any]])?.map { $0["ran"] as? String } == [
                "without memwarn (not in the service)", "without memwarn (not in the service)",
            ])
        let jsonText = try report.json()
        #expect(!jsonText.contains("with memwarn"), "\(jsonText)")
        // With memwarn in the service, the same report keeps its names.
        let linked = SoakReport(
            subject: "./my-service", memoryMaxBytes: limits[0], limits: limits, durationSeconds: 60,
            runs: [Self.run(memwarn: true, limit: limits[1], survived: true), Self.run(memwarn: false, limit: limits[1], survived: false)])
        #expect(linked.text.contains("lowest limit survived: with memwarn 40.0 MiB, without none of"), "\(linked.text)")
        #expect((try Self.json(linked)["lowestSurvivingLimit"] as? [String: Any])?["withoutMemwarn"] == nil)
    }
}

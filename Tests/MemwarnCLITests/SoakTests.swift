import Foundation
import MemwarnSystem
import MemwarnTestKit
import Testing

@testable import MemwarnSoak

#if canImport(FoundationXML)
import FoundationXML
#endif

/// The soak's parts on their own: sizes, the demo's event lines, the report and the plot.
/// (The soak itself runs in CI, `Scripts/ci-soak`: about a minute on real cgroups.)
@Suite struct SoakTests {
    @Test func sizesTakeBinaryUnitsAndRefuseNonsense() {
        #expect(ByteSize.parse("67108864") == 67_108_864)
        #expect(ByteSize.parse("64M") == 64 << 20)
        #expect(ByteSize.parse("64MiB") == 64 << 20)
        #expect(ByteSize.parse("64mb") == 64 << 20)
        #expect(ByteSize.parse("1.5G") == 3 << 29)
        #expect(ByteSize.parse("512k") == 512 << 10)
        // Kubernetes' binary suffixes, as a manifest writes them (the DaemonSet's --min-available 750Mi).
        #expect(ByteSize.parse("750Mi") == 750 << 20)
        #expect(ByteSize.parse("2Gi") == 2 << 30)
        #expect(ByteSize.parse("64Ki") == 64 << 10)
        for bad in ["", "M", "lots", "-5M", "64X", "0", "1e30", "nan", "64i", "64ii", "64Mii"] { #expect(ByteSize.parse(bad) == nil, "\(bad)") }
        #expect(ByteSize.describe(256 << 20) == "256.0 MiB")
        #expect(ByteSize.describe(3 << 29) == "1.50 GiB")
    }

    static let demoLines = [
        #"{"event":"start","memwarn":true,"pid":42,"t":0}"#,
        #"{"event":"release","freed":3000,"level":"warning","t":7.4,"target":2500,"tiers":{"caches":2000,"media":1000}}"#,
        #"{"event":"terminated","freed":6291456,"t":9.5,"unit":"user-2"}"#,
        #"{"event":"release","freed":500,"level":"critical","t":9.5,"target":400,"tiers":{"caches":500}}"#,
        #"{"event":"progress","writes":120,"t":10}"#,
        "not json at all",
        #"{"event":"summary","lostWrites":0,"t":21,"users":9,"writesAcknowledged":300,"writesVerified":300}"#,
    ]

    @Test func theDemosEventLinesAreReadAndOtherLinesKept() {
        var record = DemoRecord()
        for line in Self.demoLines { record.read(line) }
        #expect(record.releases.count == 2)
        #expect(record.releasedByTier == ["caches": 2_500, "media": 1_000])
        #expect(record.terminations == [.init(seconds: 9.5, unit: "user-2", freedBytes: 6_291_456)])
        #expect(record.writesAcknowledgedSoFar == 120)
        #expect(record.writesAcknowledged == 300 && record.writesVerified == 300 && record.lostWrites == 0 && record.users == 9)
        #expect(record.otherLines == ["not json at all"])
    }

    static func run(memwarn: Bool, survived: Bool, lost: Int?) -> SoakRun {
        var demo = DemoRecord()
        for line in demoLines where survived || !line.contains("summary") { demo.read(line) }
        demo.lostWrites = survived ? lost : nil
        let exit = survived ? ProcessExit(status: 0) : ProcessExit(signal: 9)
        let report = ConstrainedRunReport(
            command: ["memwarn-demo"], cgroup: "/x", memoryMaxBytes: 256 << 20, memoryHighBytes: nil, exit: exit, exitCode: exit.code,
            oomKills: survived ? 0 : 1, peakUsageBytes: 250 << 20, warnings: ["warning": 3, "critical": 2],
            levelChanges: [.init(seconds: 7.4, level: "warning", usageBytes: 210 << 20), .init(seconds: 9.5, level: "critical", usageBytes: 232 << 20)],
            durationSeconds: survived ? 21 : 10.5, cgroupRemoved: true,
            samples: (0..<100).map { SoakSample(seconds: Double($0) / 5, usageBytes: UInt64($0) << 21) })
        return SoakRun(
            label: memwarn ? "memwarn" : "baseline", memwarnEnabled: memwarn, memoryMaxBytes: 256 << 20, run: report, demo: demo,
            service: ServiceTelemetry(), trend: MemoryTrend.analyse([], spanSeconds: 20, limitBytes: 256 << 20, basis: "anonymous memory"),
            end: .serviceExited)
    }

    @Test func theReportPassesOnlyWhenTheMemwarnRunSurvivedWithNothingLost() throws {
        let good = SoakReport(
            subject: "memwarn-demo", memoryMaxBytes: 256 << 20, limits: [256 << 20], durationSeconds: 20,
            runs: [Self.run(memwarn: true, survived: true, lost: 0), Self.run(memwarn: false, survived: false, lost: nil)])
        #expect(good.passed)
        #expect(good.text.contains("survived 21 s"))
        #expect(good.text.contains("killed after 10.5 s (signal 9)"))
        #expect(good.text.contains("unknown (killed before verifying)"))
        #expect(
            good.text.hasSuffix("PASS: with memwarn the service survived, with 0 OOM kills and 0 lost writes; without memwarn it did not (killed after 10.5 s)")
        )
        let json = try #require(try JSONSerialization.jsonObject(with: Data(good.json().utf8)) as? [String: Any])
        #expect(json["passed"] as? Bool == true)
        let runs = try #require(json["runs"] as? [[String: Any]])
        #expect(runs.map { $0["survived"] as? Bool } == [true, false])
        #expect(runs.map { $0["oomKills"] as? Int } == [0, 1])
        #expect(runs[0]["releasedBytesByTier"] as? [String: Int] == ["caches": 2_500, "media": 1_000])

        let lost = SoakReport(
            subject: "memwarn-demo", memoryMaxBytes: 256 << 20, limits: [256 << 20], durationSeconds: 20,
            runs: [Self.run(memwarn: true, survived: true, lost: 3)])
        #expect(!lost.passed)
        let killed = SoakReport(
            subject: "memwarn-demo", memoryMaxBytes: 256 << 20, limits: [256 << 20], durationSeconds: 20,
            runs: [Self.run(memwarn: true, survived: false, lost: nil)])
        #expect(!killed.passed)
        #expect(killed.text.contains("FAIL: with memwarn the service did not survive cleanly\n"))
        #expect(
            killed.text.hasSuffix("killed with no exhaustion reported: releasable memory was left, and the releases did not keep up with growth"),
            "a killed run says why")
    }

    /// Counts the elements of an SVG by name, failing on XML that does not parse.
    final class ElementCounter: NSObject, XMLParserDelegate {
        var counts: [String: Int] = [:]
        var texts: [String] = []
        func parser(_ parser: XMLParser, didStartElement name: String, namespaceURI: String?, qualifiedName: String?, attributes: [String: String] = [:]) {
            counts[name, default: 0] += 1
        }
        func parser(_ parser: XMLParser, foundCharacters string: String) { texts.append(string) }
    }

    @Test func thePlotIsWellFormedSVGWithOnePanelARunAndItsEventsMarked() throws {
        let report = SoakReport(
            subject: "memwarn-demo", memoryMaxBytes: 256 << 20, limits: [256 << 20], durationSeconds: 20,
            runs: [Self.run(memwarn: true, survived: true, lost: 0), Self.run(memwarn: false, survived: false, lost: nil)])
        let svg = SoakPlot.svg(report)
        let parser = XMLParser(data: Data(svg.utf8))
        let counter = ElementCounter()
        parser.delegate = counter
        #expect(parser.parse(), "the SVG is well-formed XML: \(parser.parserError.map(String.init(describing:)) ?? "")")
        #expect(counter.counts["svg"] == 1)
        #expect(counter.counts["polyline"] == 2, "one usage line per run")
        #expect(counter.counts["circle"] == 2, "the memwarn run's termination, marked in its panel; the baseline has none")
        #expect(counter.counts["path"] == 1, "one OOM-kill cross, the baseline's")
        let text = counter.texts.joined()
        #expect(text.contains("with memwarn: survived"))
        #expect(text.contains("without memwarn (baseline): killed after 10.5 s"))
        #expect(text.contains("limit 256.0 MiB"))
    }

    @Test func loadSheddingCountersAreSummedOverTheirLabelsAndATimestampIsNotAValue() {
        let page = """
            # HELP service_requests_shed_total Requests shed.
            # TYPE service_requests_shed_total counter
            service_requests_shed_total{route="/jobs"} 30 1712345678901
            service_requests_shed_total{route="/reports",code="503"} 12
            queue_shed_total 5
            memwarn_released_bytes_total{tier="caches"} 1e9
            """
        #expect(ServiceWatch.shedCounters(in: page, names: []) == ["service_requests_shed_total": 42, "queue_shed_total": 5])
        #expect(ServiceWatch.shedCounters(in: page, names: ["queue_shed_total"]) == ["queue_shed_total": 5])
    }

    @Test func soakRefusesBadArgumentsWithOneLine() throws {
        for arguments in [["soak", "--memory-max", "lots"], ["soak", "--duration", "soon"], ["soak", "--bogus"]] {
            let result = try ChildProcess.run([ChildProcess.productsDirectory + "/memwarn"] + arguments)
            #expect(result.status >= 1, "\(arguments)")
            #expect(result.standardError.hasPrefix("Error: "), "\(arguments): \(result.standardError)")
        }
    }
}

import Foundation
import MemwarnSystem
import MemwarnTestKit
import Testing

@testable import MemwarnSoak

#if canImport(Glibc)
import Glibc
#endif

/// Figures a service gives that are no count — a counter past what a `Double` counts by ones,
/// samples whose sum is +Inf, a release count that wraps or goes back between polls — and those
/// the demo's lines give: the soak's report, as text and as JSON, says them as such and is
/// always written. These traps came after the whole soak, and the report was lost with them.
@Suite struct SoakOddFiguresTests {
    static let limit: UInt64 = 128 << 20

    /// A report of one run with memwarn that survived 120 s of load, with the service's
    /// `figures` and what they cost.
    static func report(_ figures: ServiceTelemetry) -> SoakReport {
        var run = SoakReportReadingTests.run(memwarn: true, limit: limit, survived: true)
        run.service = figures
        run.cost = SurvivalCost.of(figures, from: 0, until: 120)
        return SoakReport(subject: "./my-service", memoryMaxBytes: limit, limits: [limit], durationSeconds: 120, runs: [run])
    }

    /// The report's only run, in its JSON.
    static func jsonRun(_ report: SoakReport) throws -> [String: Any] {
        try #require((try SoakReportReadingTests.json(report)["runs"] as? [[String: Any]])?.first)
    }

    /// The table's row `name` without its name: the run's cell.
    static func cell(_ name: String, in text: String) -> String? {
        text.split(separator: "\n").first { $0.hasPrefix(name + "  ") }.map { String($0.dropFirst(name.count)).trimmingCharacters(in: .whitespaces) }
    }

    /// A Prometheus page whose counters of each name have two samples of `1e308`: each sums to +Inf.
    static let page = """
        jobs_shed_total{queue="a"} 1e308
        jobs_shed_total{queue="b"} 1e308
        http_requests_total{route="/a"} 1e308
        http_requests_total{route="/b"} 1e308
        thumbnails_cache_hits_total 1e308
        thumbnails_cache_hits_total{shard="2"} 1e308
        """

    /// Shedding counters that are no count, and why: past 2^53 (a counter of 1e19, two samples
    /// of 1e308 read from a page), +Inf beside -Inf (whose sum is NaN), NaN itself.
    static let oddShedding: [(counters: [String: Double], reason: String)] = [
        (["jobs_shed_total": 1e19], "the service's counters sum to more than 2^53"),
        (ServiceWatch.shedCounters(in: page, names: []), "the service's counters sum to more than 2^53"),
        (["a_shed_total": .infinity, "b_shed_total": -.infinity], "the service's counters are below 0"),
        (["jobs_shed_total": .nan], "the service's counters are not finite"),
    ]

    /// A service that links memwarn and whose `/metrics` gave these shedding counters.
    static func shedding(_ counters: [String: Double]) -> ServiceTelemetry {
        var figures = ServiceTelemetry()
        figures.linksMemwarn = true
        figures.metricsScraped = true
        figures.shedCounters = counters
        return figures
    }

    @Test(arguments: oddShedding)
    func theJSONGivesNoLoadShedForCountersThatAreNoCountButTheReason(counters: [String: Double], reason: String) throws {
        let run = try Self.jsonRun(Self.report(Self.shedding(counters)))
        #expect(run["shed"] == nil, "no figure made of \(counters): \(run)")
        #expect(run["shedUnreadable"] as? String == reason, "\(run)")
    }

    @Test(arguments: oddShedding)
    func theTextSaysTheLoadShedIsUnreadableAndWhy(counters: [String: Double], reason: String) {
        let text = Self.report(Self.shedding(counters)).text
        let names = counters.keys.sorted().joined(separator: ", ")
        #expect(Self.cell("load shed", in: text) == "unreadable: \(reason) (\(names))", "\(text)")
        #expect(text.hasSuffix("PASS: with memwarn the service survived, with 0 OOM kills"), "the rest of the report is whole: \(text)")
    }

    @Test func aLoadShedThatIsACountIsPrintedAsOne() throws {
        let figures = Self.shedding(["jobs_shed_total": 42, "queue_shed_total": 0x1p53 - 42])
        #expect(Self.cell("load shed", in: Self.report(figures).text) == "9007199254740992 (jobs_shed_total, queue_shed_total)")
        let run = try Self.jsonRun(Self.report(figures))
        #expect(run["shed"] as? Double == 0x1p53 && run["shedUnreadable"] == nil, "2^53 is still a count: \(run)")
    }

    @Test func requestAndCacheCountersThatAreNoCountGiveNoFigureButTheReason() throws {
        var figures = ServiceTelemetry()
        figures.metricsScraped = true
        let requests = ServiceWatch.requestCounters(in: Self.page, names: []).values.reduce(0, +)
        let hits = ServiceWatch.counters(in: Self.page) { $0.hasSuffix("_cache_hits_total") }.values.reduce(0, +)
        figures.requestSamples = [.init(seconds: 0, value: 1_000), .init(seconds: 120, value: requests)]
        figures.cacheSamples = [.init(seconds: 0, hits: 10, misses: 10), .init(seconds: 120, hits: hits, misses: 20)]
        let cost = SurvivalCost.of(figures, from: 0, until: 120)
        #expect(cost.requestsPerSecond == nil && cost.cacheMissRate == nil, "no figure made of +Inf: \(cost)")
        let json = try #require(try Self.jsonRun(Self.report(figures))["cost"] as? [String: Any])
        #expect(json["requestsUnreadable"] as? String == "the service's request counters sum to more than 2^53", "\(json)")
        #expect(json["cacheLookupsUnreadable"] as? String == "the service's cache counters sum to more than 2^53", "\(json)")
        let text = Self.report(figures).text
        #expect(Self.cell("throughput", in: text) == "unreadable" && Self.cell("cache miss rate", in: text) == "unreadable", "\(text)")
        #expect(
            text.contains(
                "throughput unreadable: the service's request counters sum to more than 2^53, "
                    + "cache miss rate unreadable: the service's cache counters sum to more than 2^53"), "the notes say why: \(text)")
        // NaN, which no page gives but a sum of +Inf and -Inf is, is said as such too.
        figures.requestSamples[1].value = .nan
        let nan = try #require(try Self.jsonRun(Self.report(figures))["cost"] as? [String: Any])
        #expect(nan["requestsUnreadable"] as? String == "the service's request counters are not finite", "\(nan)")
    }

    // MARK: Release counts that wrap or go back between polls

    /// A service read once a second from 0 to 120 s, its release count at `second` being
    /// `count(second)`; it frees 8 MiB and spends 4 ms releasing a second.
    static func releasing(_ count: (Int) -> Int) -> ServiceTelemetry {
        var figures = ServiceTelemetry()
        figures.linksMemwarn = true
        figures.releaseSamples = (0...120).map { second in
            .init(seconds: Double(second), releases: count(second), freedBytes: second * 8 << 20, releaseSeconds: Double(second) * 0.004)
        }
        return figures
    }

    /// Two releases a second, counted from past `Int.max - 140` (it wraps to `Int.min` after
    /// 70 s) or from 0 by a service that restarts at 61 s: one interval goes backwards, and the
    /// longest stretch of releases every second, before it, is thrashing.
    static let backwards: [(count: @Sendable (Int) -> Int, thrashingSeconds: Double)] = [
        ({ Int.max - 140 &+ 2 &* $0 }, 70),
        ({ $0 <= 60 ? 2 * $0 : 2 * ($0 - 61) }, 60),
    ]

    @Test(arguments: backwards)
    func releasesThatGoBackwardsBetweenPollsAreLeftOutAndTheRestCounted(count: @Sendable (Int) -> Int, thrashingSeconds: Double) throws {
        let figures = Self.releasing(count)
        let cost = SurvivalCost.of(figures, from: 0, until: 120)
        #expect(cost.seconds == 119, "120 intervals, one left out: \(cost)")
        #expect(abs((cost.releasesPerSecond ?? 0) - 2) < 1e-9, "two a second in every interval counted: \(cost)")
        #expect(abs((cost.releasedBytesPerMinute ?? 0) - Double(8 << 20) * 60) < 1, "\(cost)")
        let thrashing = try #require(cost.thrashing, "\(cost)")
        #expect(thrashing.fromSeconds == 0 && thrashing.seconds == thrashingSeconds && abs(thrashing.releasesPerSecond - 2) < 1e-9, "\(thrashing)")
        let json = try #require(try Self.jsonRun(Self.report(figures))["cost"] as? [String: Any])
        #expect(json["releaseIntervalsLeftOut"] as? Int == 1, "\(json)")
        let text = Self.report(figures).text
        #expect(Self.cell("releases/s", in: text) == "2.00", "\(text)")
        #expect(text.contains("releases went backwards between polls (1 interval: the service's count restarted or wrapped): not counted"), "\(text)")
    }

    @Test func releasesThatOnlyWentBackwardsAreUnreadableNeverZero() throws {
        var figures = ServiceTelemetry()
        figures.linksMemwarn = true
        // The service restarted between its only two answers: nothing can be counted (it read as 0 releases/s).
        figures.releaseSamples = [
            .init(seconds: 0, releases: 500, freedBytes: 500 << 20, releaseSeconds: 1),
            .init(seconds: 60, releases: 3, freedBytes: 3 << 20, releaseSeconds: 0.01),
        ]
        let cost = SurvivalCost.of(figures, from: 0, until: 120)
        #expect(cost.releasesPerSecond == nil && cost.releasedBytesPerMinute == nil && cost.releasingShare == nil, "\(cost)")
        let text = Self.report(figures).text
        for row in ["releases/s", "released/min", "time releasing", "thrashing"] { #expect(Self.cell(row, in: text) == "unreadable", "\(row): \(text)") }
        #expect(try #require(try Self.jsonRun(Self.report(figures))["cost"] as? [String: Any])["releaseIntervalsLeftOut"] as? Int == 1)
    }

    // MARK: The demo's lines

    @Test func theDemosOddLinesNeitherTrapThePlotNorTheKillReason() {
        var demo = DemoRecord()
        demo.read(#"{"event":"release","freed":-5,"level":"warning","t":2,"tiers":{"caches":-5}}"#)
        demo.read(#"{"event":"terminated","freed":-7,"t":3,"unit":"user-1"}"#)
        demo.read(#"{"event":"exhausted","floor":9223372036854775807,"capacity":1,"growth":9223372036854775807,"t":4}"#)
        var run = SoakTests.run(memwarn: true, survived: false, lost: nil)
        run.demo = demo
        let report = SoakReport(subject: "memwarn-demo", memoryMaxBytes: 256 << 20, limits: [256 << 20], durationSeconds: 20, runs: [run])
        let svg = SoakPlot.svg(report)
        #expect(svg.contains("release at warning: 0.0 MiB freed") && svg.contains("user-1 terminated, 0.0 MiB freed"), "a negative size reads as 0")
        #expect(run.killReason?.hasPrefix("killed: the floor, ") == true, "a floor and growth past Int.max did not fit: \(run.killReason ?? "")")
    }
}

extension RunCommandTests.SoakServiceTests {
    // MARK: Odd figures from a real service, through the real report writer

    /// A service (Python) that serves `/metrics` with counters that are no count — a shed counter
    /// of 1e19, two request samples of 1e308 — and a control endpoint whose release count wraps
    /// past `Int.max` at its third answer. Arguments: the port, the control directory, a marker.
    static let oddService = #"""
        import http.server, json, os, socket, sys, threading
        port, directory = int(sys.argv[1]), sys.argv[2]
        page = b'jobs_shed_total 1e19\nhttp_requests_total{route="/a"} 1e308\nhttp_requests_total{route="/b"} 1e308\n'
        def control():
            server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            server.bind(os.path.join(directory, "%d.sock" % os.getpid()))
            server.listen(8)
            releases = 2**63 - 3
            while True:
                connection, _ = server.accept()
                with connection:
                    connection.recv(4096)
                    reply = {"ok": True, "request": "status", "pid": os.getpid(), "level": "normal", "usageBytes": None,
                             "limitBytes": None, "cgroupPath": None, "consumers": [], "releases": releases}
                    connection.sendall((json.dumps(reply) + "\n").encode())
                releases = (releases + 2 + 2**63) % 2**64 - 2**63
        threading.Thread(target=control, daemon=True).start()
        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                body = page if self.path == "/metrics" else b"ok\n"
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            def log_message(self, *arguments):
                pass
        http.server.HTTPServer(("127.0.0.1", port), Handler).serve_forever()
        """#

    @Test func aServiceWhoseCountersAreNoCountStillGetsItsWholeReportAsTextAndJSON() async throws {
        let marker = "1040.5"
        let directory = try FileSystem.makeUniqueDirectory(template: "/tmp/memwarn-\(geteuid()).XXXXXX")
        defer {
            for pid in Self.processes(marked: marker) { kill(pid, SIGKILL) }  // ours, left by a soak that did not stop them
            try? FileManager.default.removeItem(atPath: directory)
        }
        func soak(json: Bool) async throws -> (status: Int32, output: String, errors: String, pid: Int32) {
            let port = try Self.freePort()
            return try await Self.soak(
                ["--memory-max", "64M", "--duration", "4s", "--no-baseline", "--ready-url", "http://127.0.0.1:\(port)/"] + (json ? ["--json"] : [])
                    + ["--", "/usr/bin/python3", "-c", Self.oddService, "\(port)", directory, marker])
        }
        async let asJSON = soak(json: true)
        async let asText = soak(json: false)
        let (json, text) = try await (asJSON, asText)
        #expect(json.status == 0 && text.status == 0, "the report, not a trap: \(json.errors) \(text.errors)")
        let run = try #require((try Self.json(json.output)["runs"] as? [[String: Any]])?.first)
        #expect(run["linksMemwarn"] as? Bool == true, "the service's endpoint answered: \(run)")
        #expect(run["shed"] == nil && run["shedUnreadable"] as? String == "the service's counters sum to more than 2^53", "\(run)")
        let cost = try #require(run["cost"] as? [String: Any], "\(run)")
        #expect(cost["requestsUnreadable"] as? String == "the service's request counters sum to more than 2^53", "\(cost)")
        #expect(cost["releaseIntervalsLeftOut"] as? Int == 1, "the count wrapped once while loaded: \(cost)")
        #expect(text.output.contains("unreadable: the service's counters sum to more than 2^53 (jobs_shed_total)"), "\(text.output)")
        #expect(text.output.contains("releases went backwards between polls (1 interval"), "\(text.output)")
        #expect(text.output.contains("PASS: with memwarn the service survived"), "\(text.output)")
        #expect(try Self.soakCgroups(of: json.pid).isEmpty && Self.soakCgroups(of: text.pid).isEmpty)
    }
}

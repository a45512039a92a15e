import MemwarnMonitor
import MemwarnRelease
import MemwarnTestFixtures
import MemwarnTestKit
import MetricsTestKit
import Testing

/// Every series a monitor reports has help text (``MemwarnMetric``) and a row
/// in the article "Metrics, series by series", and a Prometheus scrape gets the help back.
struct MetricsHelpTests {
    /// A pool whose buffers are all lent out: it frees nothing and says so.
    final class LentOutPool: MemoryConsumer, Sendable {
        let name = "render-buffers"
        let tier = ReleaseTier.caches
        let footprintBytes = 48 << 20
        var inUseBytes: Int? { footprintBytes }
        func release(_ request: ReleaseRequest) -> Int { 0 }
    }

    /// A real monitor on a synthetic v2 host, driven to critical with nothing to give: every
    /// family it creates is in the catalog, every family of the catalog was created, and each
    /// has its row.
    @Test func everySeriesAMonitorReportsIsInTheCatalogAndHasARowInTheArticle() async throws {
        let host = try SyntheticHost(limit: 128 << 20)
        let factory = TestMetrics()
        var configuration = MonitorConfiguration(policy: PressurePolicy(), environment: [:])
        configuration.files = host.files
        configuration.watchesPressureStall = false
        let monitor = PressureMonitor(configuration: configuration, logger: testLogger, metricsFactory: factory)
        let coordinator = ReleaseCoordinator(trimsHeap: false)
        let pool = LentOutPool()
        coordinator.register(pool)
        let token = coordinator.attach(to: monitor)
        defer { monitor.removeObserver(token) }
        try await withRunningMonitor(monitor) { iterator in
            #expect(try await next(&iterator).level == .normal)
            try host.setUsage(0.97)
            #expect(try await next(&iterator, within: .seconds(5)).level == .critical)
            try await waitUntil("memory exhausted") { monitor.isMemoryExhausted }
        }
        let created = Set(factory.counters.map(\.label) + factory.recorders.map(\.label) + factory.timers.map(\.label) + factory.meters.map(\.label))
        let catalog = MemwarnMetric.all.map(\.name)
        #expect(created == Set(catalog), "created but not in the catalog: \(created.subtracting(catalog)); never created: \(Set(catalog).subtracting(created))")
        let inUse = try factory.expectGauge("memwarn_consumer_in_use_bytes", [("consumer", "render-buffers"), ("tier", "caches")])
        #expect(inUse.lastValue == Double(48 << 20))
        #expect(try factory.expectGauge("memwarn_exhausted_floor_bytes").lastValue == Double((128 << 20) * 97 / 100))
        let rows = try ArticleRows.metricsSeries().filter { !$0.hasPrefix("memwarn_agent_") }
        #expect(rows == catalog, "the article's rows, in order, are the catalog's: \(rows) against \(catalog)")
        #expect(MemwarnMetric.all.allSatisfy { !$0.help.isEmpty && !$0.help.contains("\n") })
    }

    /// What swift-prometheus writes for families made through swift-metrics (a `# TYPE` line
    /// alone), with help added to memwarn's families only, once each, before their `# TYPE`.
    @Test func aScrapeGetsHelpForMemwarnsFamiliesAndNothingElseChanges() {
        let scrape = """
            # TYPE memwarn_level gauge
            memwarn_level 1.0
            # TYPE memwarn_release_duration_seconds histogram
            memwarn_release_duration_seconds_bucket{le="0.005"} 3
            memwarn_release_duration_seconds_sum 0.01
            memwarn_release_duration_seconds_count 3
            # HELP memwarn_exhausted Already described.
            # TYPE memwarn_exhausted gauge
            memwarn_exhausted 0.0
            # TYPE service_requests_total counter
            service_requests_total 12
            memwarn_usage_bytes 4096
            memwarn_levels_other 1

            """
        let helped = MemwarnMetric.addingHelp(to: scrape)
        let lines = helped.split(separator: "\n", omittingEmptySubsequences: false)
        let help = { (name: String) in MemwarnMetric.all.first { $0.name == name }!.help }
        #expect(lines[0] == "# HELP memwarn_level \(help("memwarn_level"))" && lines[1] == "# TYPE memwarn_level gauge")
        #expect(lines[3] == "# HELP memwarn_release_duration_seconds \(help("memwarn_release_duration_seconds"))")
        #expect(lines.filter { $0.hasPrefix("# HELP memwarn_exhausted ") } == ["# HELP memwarn_exhausted Already described."])
        #expect(!lines.contains { $0.hasPrefix("# HELP service_") || $0.hasPrefix("# HELP memwarn_levels_other") })
        // A family with samples and no `# TYPE`: the help goes before its first sample.
        let usage = lines.firstIndex { $0 == "memwarn_usage_bytes 4096" }!
        #expect(lines[usage - 1] == "# HELP memwarn_usage_bytes \(help("memwarn_usage_bytes"))")
        // A family whose help stands after its TYPE keeps that one help line.
        let late = MemwarnMetric.addingHelp(to: "# TYPE memwarn_level gauge\n# HELP memwarn_level Mine.\nmemwarn_level 0\n")
        #expect(late == "# TYPE memwarn_level gauge\n# HELP memwarn_level Mine.\nmemwarn_level 0\n")
        // Histogram suffixes belong to a timer's family only: `memwarn_level_count` is not `memwarn_level`.
        let foreign = MemwarnMetric.addingHelp(to: "memwarn_level_count 3\nmemwarn_release_duration_seconds_count 2\n")
        #expect(
            foreign
                == "memwarn_level_count 3\n# HELP memwarn_release_duration_seconds \(help("memwarn_release_duration_seconds"))\n"
                + "memwarn_release_duration_seconds_count 2\n")
        // Every other line is the scrape's own, in order.
        #expect(
            lines.filter { !$0.hasPrefix("# HELP ") || $0.hasSuffix("Already described.") } == scrape.split(separator: "\n", omittingEmptySubsequences: false))
    }
}

import Memwarn
import Metrics
import MetricsTestKit
import Testing

@testable import MemwarnMonitor
@testable import MemwarnRelease

/// Issue 28, item 15: `memwarn_consumer_footprint_bytes` kept a series for every consumer ever
/// seen (300 series, none live, in the Hummingbird example, whose unit names come from request
/// data). Now the series of consumers gone are destroyed and the label set is bounded.
struct ConsumerMetricsTests {
    typealias FakeConsumer = CacheFixtures.FakeConsumer
    static let label = "memwarn_consumer_footprint_bytes"

    static func report() -> ReleaseReport { ReleaseReport(level: .warning, targetBytes: 0, entries: [], trimmedHeap: false, duration: .zero) }

    @Test func seriesOfConsumersGoneAreDestroyedAndTheLabelSetIsBounded() throws {
        let factory = TestMetrics()
        let metrics = MonitorMetrics(factory: factory)
        var units = (0..<300).map { FakeConsumer("unit-\($0)", tier: .caches, footprint: ($0 + 1) << 10) }
        metrics.record(Self.report(), consumers: units)
        let series = factory.recorders(label: Self.label)
        #expect(series.count == ReleaseTotals.maximumConsumerNames + 1, "the 64 largest and one for the rest: \(series.count)")
        let rest = try factory.expectGauge(Self.label, [("consumer", ReleaseTotals.otherConsumers), ("tier", "caches")])
        #expect(rest.lastValue == Double((1...236).reduce(0, +) << 10), "the 236 smallest summed")
        #expect(try factory.expectGauge(Self.label, [("consumer", "unit-299"), ("tier", "caches")]).lastValue == Double(300 << 10))

        units = [units[0], units[299]]  // the others are gone
        metrics.record(Self.report(), consumers: units)
        let live = factory.recorders(label: Self.label).map { Dictionary($0.dimensions, uniquingKeysWith: { a, _ in a })["consumer"] ?? "" }
        #expect(Set(live) == ["unit-0", "unit-299"], "\(live.count) series")
    }

    @Test func consumersSharingANameAndTierAreOneSeriesOfTheirSum() throws {
        let factory = TestMetrics()
        let metrics = MonitorMetrics(factory: factory)
        let pair = [FakeConsumer("sessions", tier: .caches, footprint: 3 << 20), FakeConsumer("sessions", tier: .caches, footprint: 5 << 20)]
        metrics.record(Self.report(), consumers: pair)
        #expect(try factory.expectGauge(Self.label, [("consumer", "sessions"), ("tier", "caches")]).lastValue == Double(8 << 20))
    }
}

import MemwarnTestFixtures
import Metrics
import MetricsTestKit
import Testing

@testable import MemwarnMonitor
@testable import MemwarnRelease

/// `memwarn_consumer_footprint_bytes` kept a series for every consumer ever
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

    /// A consumer that says what it has in use, rightly or not.
    final class SayingConsumer: MemoryConsumer, Sendable {
        let name: String
        let tier = ReleaseTier.caches
        let footprintBytes: Int
        let inUseBytes: Int?
        init(_ name: String, footprint: Int, inUse: Int?) {
            self.name = name
            footprintBytes = footprint
            inUseBytes = inUse
        }
        func release(_ request: ReleaseRequest) -> Int { 0 }
    }

    /// `memwarn_consumer_in_use_bytes` has a series for each consumer that reports its bytes in
    /// use, clamped to 0…footprint, and none for the consumers that do not.
    @Test func theInUseSeriesCarriesWhatConsumersSayWithinTheirFootprint() throws {
        let factory = TestMetrics()
        let metrics = MonitorMetrics(factory: factory)
        let consumers = [
            SayingConsumer("honest", footprint: 8 << 20, inUse: 3 << 20), SayingConsumer("negative", footprint: 4 << 20, inUse: -1),
            SayingConsumer("boastful", footprint: 2 << 20, inUse: 9 << 20), SayingConsumer("silent", footprint: 1 << 20, inUse: nil),
        ]
        metrics.record(Self.report(), consumers: consumers)
        let label = "memwarn_consumer_in_use_bytes"
        #expect(try factory.expectGauge(label, [("consumer", "honest"), ("tier", "caches")]).lastValue == Double(3 << 20))
        #expect(try factory.expectGauge(label, [("consumer", "negative"), ("tier", "caches")]).lastValue == 0)
        #expect(try factory.expectGauge(label, [("consumer", "boastful"), ("tier", "caches")]).lastValue == Double(2 << 20))
        #expect(factory.recorders(label: label).count == 3, "no series for the consumer that does not say")
    }

    @Test func consumersSharingANameAndTierAreOneSeriesOfTheirSum() throws {
        let factory = TestMetrics()
        let metrics = MonitorMetrics(factory: factory)
        let pair = [FakeConsumer("sessions", tier: .caches, footprint: 3 << 20), FakeConsumer("sessions", tier: .caches, footprint: 5 << 20)]
        metrics.record(Self.report(), consumers: pair)
        #expect(try factory.expectGauge(Self.label, [("consumer", "sessions"), ("tier", "caches")]).lastValue == Double(8 << 20))
    }
}

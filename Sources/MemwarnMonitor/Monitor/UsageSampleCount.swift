/// How many times usage was sampled: counted by the engine on its loop thread, read by anyone
/// (`usageSampleCount`), and reported as `memwarn_usage_samples_total`. Up to
/// 200 reads a second: one relaxed add and one counter increment each, no lock, no hop.
final class UsageSampleCount: Sendable {
    private let count = SharedCount()
    private let metrics: MonitorMetrics

    init(metrics: MonitorMetrics) { self.metrics = metrics }

    /// The reads so far.
    var value: Int { count.value }

    /// One more read.
    func add() {
        count.add()
        metrics.recordUsageSample()
    }
}

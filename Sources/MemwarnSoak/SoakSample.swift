/// One reading of a constrained run's cgroup: when, and how much memory it used.
package struct SoakSample: Sendable, Hashable, Codable {
    /// Seconds since the run started.
    package var seconds: Double
    package var usageBytes: UInt64

    package init(seconds: Double, usageBytes: UInt64) {
        self.seconds = seconds
        self.usageBytes = usageBytes
    }
}

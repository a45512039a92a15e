/// One reading of a constrained run's cgroup: when, and how much memory it used.
public struct SoakSample: Sendable, Hashable, Codable {
    /// Seconds since the run started.
    public var seconds: Double
    public var usageBytes: UInt64

    public init(seconds: Double, usageBytes: UInt64) {
        self.seconds = seconds
        self.usageBytes = usageBytes
    }
}

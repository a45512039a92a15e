/// What a control endpoint answers to `status`: the monitor's latest reading and the
/// coordinator's consumers.
public struct ControlStatus: Sendable, Hashable, Codable {
    /// One registered consumer.
    public struct Consumer: Sendable, Hashable, Codable {
        /// The consumer's name.
        public var name: String
        /// Its tier's name, such as `caches`.
        public var tier: String
        /// The bytes it holds now.
        public var footprintBytes: Int
    }

    /// The process's pid.
    public var pid: Int32
    /// The monitor's level (`normal` before its first reading).
    public var level: MemoryPressureLevel
    /// The latest usage, or `nil` before the first reading.
    public var usageBytes: UInt64?
    /// The effective limit, or `nil` when none applies or before the first reading.
    public var limitBytes: UInt64?
    /// The memory cgroup watched, or `nil` when unknown.
    public var cgroupPath: String?
    /// The coordinator's live consumers, in release order: by tier, the largest first.
    public var consumers: [Consumer]

    private enum CodingKeys: String, CodingKey {
        case pid, level, usageBytes, limitBytes, cgroupPath, consumers
    }

    /// Every key is present: unknown values are `null`.
    ///
    /// - Parameter encoder: the encoder to write to.
    /// - Throws: what the encoder throws.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(pid, forKey: .pid)
        try container.encode(level, forKey: .level)
        try container.encode(usageBytes, forKey: .usageBytes)
        try container.encode(limitBytes, forKey: .limitBytes)
        try container.encode(cgroupPath, forKey: .cgroupPath)
        try container.encode(consumers, forKey: .consumers)
    }
}

extension ReleaseReport: Encodable {
    private enum CodingKeys: String, CodingKey {
        case level, targetBytes, headroomBytes, growthBytesPerSecond, freedBytes, metTarget, trimmedHeap, durationMicroseconds, entries
    }

    /// Encodes as `memwarn trigger --json` prints it; durations in microseconds.
    ///
    /// - Parameter encoder: the encoder to write to.
    /// - Throws: what the encoder throws.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(level, forKey: .level)
        try container.encode(targetBytes, forKey: .targetBytes)
        try container.encode(headroomBytes, forKey: .headroomBytes)
        try container.encode(growthBytesPerSecond, forKey: .growthBytesPerSecond)
        try container.encode(freedBytes, forKey: .freedBytes)
        try container.encode(metTarget, forKey: .metTarget)
        try container.encode(trimmedHeap, forKey: .trimmedHeap)
        try container.encode(duration.microseconds, forKey: .durationMicroseconds)
        try container.encode(entries, forKey: .entries)
    }
}

extension ReleaseReport.Entry: Encodable {
    private enum CodingKeys: String, CodingKey {
        case consumer, tier, bytesBefore, bytesAfter, bytesFreed, durationMicroseconds
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(consumer, forKey: .consumer)
        try container.encode(tier.name, forKey: .tier)
        try container.encode(bytesBefore, forKey: .bytesBefore)
        try container.encode(bytesAfter, forKey: .bytesAfter)
        try container.encode(bytesFreed, forKey: .bytesFreed)
        try container.encode(duration.microseconds, forKey: .durationMicroseconds)
    }
}

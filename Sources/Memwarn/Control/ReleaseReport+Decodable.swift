/// Reads a report back from the JSON it encodes to (`memwarn trigger` reads endpoints' replies).
extension ReleaseReport: Decodable {
    private enum ReportKeys: String, CodingKey {
        case level, targetBytes, headroomBytes, growthBytesPerSecond, trimmedHeap, durationMicroseconds, entries
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: ReportKeys.self)
        self.init(level: try container.decode(MemoryPressureLevel.self, forKey: .level),
                  targetBytes: try container.decode(Int.self, forKey: .targetBytes),
                  entries: try container.decode([Entry].self, forKey: .entries),
                  trimmedHeap: try container.decode(Bool.self, forKey: .trimmedHeap),
                  duration: .microseconds(try container.decode(Int64.self, forKey: .durationMicroseconds)))
        // Absent from endpoints of earlier versions.
        headroomBytes = try container.decodeIfPresent(Int.self, forKey: .headroomBytes) ?? 0
        growthBytesPerSecond = try container.decodeIfPresent(Double.self, forKey: .growthBytesPerSecond) ?? 0
    }
}

extension ReleaseReport.Entry: Decodable {
    private enum EntryKeys: String, CodingKey {
        case consumer, tier, bytesBefore, bytesAfter, bytesFreed, durationMicroseconds
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: EntryKeys.self)
        let tierName = try container.decode(String.self, forKey: .tier)
        guard let tier = ReleaseTier.all.first(where: { $0.name == tierName }) else {
            throw DecodingError.dataCorruptedError(forKey: .tier, in: container, debugDescription: "unknown tier \(tierName)")
        }
        self.init(consumer: try container.decode(String.self, forKey: .consumer), tier: tier,
                  bytesBefore: try container.decode(Int.self, forKey: .bytesBefore),
                  bytesAfter: try container.decode(Int.self, forKey: .bytesAfter),
                  bytesFreed: try container.decode(Int.self, forKey: .bytesFreed),
                  duration: .microseconds(try container.decode(Int64.self, forKey: .durationMicroseconds)))
    }
}

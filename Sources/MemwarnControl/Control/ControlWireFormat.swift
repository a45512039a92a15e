import MemwarnMonitor
public import MemwarnRelease
import MemwarnSystem

// The control protocol's wire format, in one place: a request is one JSON object on one line, a
// reply one JSON object on one line (keys sorted), a release report the JSON `memwarn trigger
// --json` prints. Encoding and decoding sit side by side, so the two ends cannot drift apart.
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

// MARK: Requests

extension ControlRequest {
    /// The request as one JSON object, without the newline (`targetBytes` only when not `Int.max`).
    package var line: String { line(summary: false) }

    /// The request as one JSON object, asking for the reply's summary form when `summary` is set
    /// (`"summary":true`): a status's consumers and a release report's entries folded into one a
    /// tier (``ControlSubject``), so that a reply stays a few hundred bytes whatever the service
    /// registers. A node agent asks for it: it reads every service's replies, in bounded memory.
    package func line(summary: Bool) -> String {
        var members = [#""request":"\#(name)""#]
        if summary { members.append(#""summary":true"#) }
        switch self {
        case .status:
            break
        case .warn(let level, let targetBytes):
            members.append(#""level":"\#(level.rawValue)""#)
            if targetBytes != .max { members.append(#""targetBytes":\#(targetBytes)"#) }
        case .terminateSuspended(let targetBytes):
            if targetBytes != .max { members.append(#""targetBytes":\#(targetBytes)"#) }
        case .coordinate(let cgroupPath, let lease):
            members.append(#""cgroup":\#(Self.jsonString(cgroupPath))"#)
            members.append(#""leaseMilliseconds":\#(lease.wholeMilliseconds)"#)
        }
        return "{" + members.joined(separator: ",") + "}"
    }

    /// Reads a request line (without its newline).
    ///
    /// - Parameter line: the request's JSON object.
    /// - Throws: `ControlError` for malformed JSON, a missing or mistyped member, an unknown
    ///   request, a bad level or a negative target.
    package init(line: some Collection<UInt8>) throws(ControlError) {
        self = try Self.parse(line: line).request
    }

    /// Reads a request line (without its newline), and whether it asks for the summary form.
    ///
    /// - Throws: `ControlError` as ``init(line:)``.
    package static func parse(line: some Collection<UInt8>) throws(ControlError) -> (request: ControlRequest, summary: Bool) {
        let fields = try Self.fields(Data(line))
        return (try request(fields), fields.summary ?? false)
    }

    private static func request(_ fields: Fields) throws(ControlError) -> ControlRequest {
        let targetBytes = fields.targetBytes ?? .max
        guard targetBytes >= 0 else { throw ControlError(.malformedRequest, "bad targetBytes \(targetBytes): it must be 0 or more") }
        switch fields.request {
        case "status":
            return .status
        case "warn":
            let name = fields.level ?? MemoryPressureLevel.warning.rawValue
            guard let level = MemoryPressureLevel(rawValue: name), level != .normal else {
                throw ControlError(.malformedRequest, #"bad level "\#(name)" (expected warning or critical)"#)
            }
            return .warn(level: level, targetBytes: targetBytes)
        case "terminate-suspended":
            return .terminateSuspended(targetBytes: targetBytes)
        case "coordinate":
            guard let cgroup = fields.cgroup, cgroup.hasPrefix("/") else {
                throw ControlError(.malformedRequest, #"coordinate needs "cgroup", a path inside the memory mount starting with /"#)
            }
            guard let milliseconds = fields.leaseMilliseconds, (0...60_000).contains(milliseconds) else {
                throw ControlError(.malformedRequest, #"coordinate needs "leaseMilliseconds" within 0...60000"#)
            }
            return .coordinate(cgroupPath: cgroup, lease: .milliseconds(milliseconds))
        default:
            throw ControlError(.malformedRequest, #"unknown request "\#(fields.request)" (expected status, warn, terminate-suspended or coordinate)"#)
        }
    }

    /// A string as a JSON string literal (every string encodes).
    private static func jsonString(_ text: String) -> String {
        (try? JSONEncoder().encode(text)).map { String(decoding: $0, as: UTF8.self) } ?? "null"
    }

    private struct Fields: Decodable {
        var request: String
        var level: String?
        var targetBytes: Int?
        var cgroup: String?
        var leaseMilliseconds: Int?
        var summary: Bool?
    }

    private static func fields(_ data: Data) throws(ControlError) -> Fields {
        do {
            return try JSONDecoder().decode(Fields.self, from: data)
        } catch DecodingError.keyNotFound(let key, _) {
            throw ControlError(.malformedRequest, #"malformed request: no "\#(key.stringValue)" member"#)
        } catch DecodingError.typeMismatch(_, let context), DecodingError.valueNotFound(_, let context) {
            let member = context.codingPath.last?.stringValue
            throw ControlError(.malformedRequest, member.map { #"malformed request: "\#($0)" has the wrong type"# } ?? Self.malformed)
        } catch {
            throw ControlError(.malformedRequest, Self.malformed)
        }
    }

    private static let malformed = #"malformed request: expected one JSON object on one line, such as {"request":"status"}"#
}

// MARK: Replies

extension ControlReply {
    /// The reply as one JSON object, keys sorted, without the newline.
    package var line: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // Every member encodes; a failure here would be a bug in the types above.
        guard let data = try? encoder.encode(self) else { return #"{"error":"the reply could not be encoded","ok":false}"# }
        return String(decoding: data, as: UTF8.self)
    }

    /// Reads a reply line.
    ///
    /// The sizes in it are the endpoint's word, and are summed by those who read it: a negative
    /// one, or one larger than any memory (2^57 bytes, 128 PiB), is refused here, saying which.
    ///
    /// - Parameter line: the reply's JSON object, with or without its newline.
    /// - Throws: `ControlError` `.malformedReply` when the line is not a reply, or carries a
    ///   size that cannot be.
    package init(line: some Collection<UInt8>) throws(ControlError) {
        do {
            self = try JSONDecoder().decode(Self.self, from: Data(line))
        } catch let error as ImplausibleSize {
            throw ControlError(.malformedReply, "unreadable reply from the endpoint: \(error.reason): \(String(decoding: line.prefix(200), as: UTF8.self))")
        } catch {
            throw ControlError(.malformedReply, "unreadable reply from the endpoint: \(String(decoding: line.prefix(200), as: UTF8.self))")
        }
    }

    /// The largest size in bytes a reply may carry: 128 PiB (2^57), the most memory a process
    /// can map on Linux (x86-64 with five-level page tables). More is no memory, but a lie or a
    /// corrupted reply; and a sum of a few such sizes would overflow.
    package static let largestPlausibleBytes = 1 << 57
}

/// A size in a reply that cannot be: negative, or more than any memory.
private struct ImplausibleSize: Error {
    /// Which member, its value, and why it cannot be.
    var reason: String
}

extension KeyedDecodingContainer {
    /// A size in bytes the endpoint sent: within 0...`ControlReply.largestPlausibleBytes`.
    ///
    /// - Parameter allowing: a value accepted besides (`Int.max`: "everything the level allows").
    /// - Throws: `ImplausibleSize` naming the member and its value, when it is negative or
    ///   larger; what `decode` throws.
    fileprivate func decodeSize(forKey key: Key, allowing special: Int? = nil) throws -> Int {
        try checkedSize(decode(Int.self, forKey: key), forKey: key, allowing: special)
    }

    /// ``decodeSize(forKey:allowing:)`` for a member an older endpoint leaves out.
    fileprivate func decodeSizeIfPresent(forKey key: Key) throws -> Int? {
        try decodeIfPresent(Int.self, forKey: key).map { try checkedSize($0, forKey: key) }
    }

    /// Sizes by name (the bytes released by tier, by consumer), each checked as
    /// ``decodeSize(forKey:allowing:)`` checks one; `nil` when the member is absent.
    fileprivate func decodeSizesIfPresent(forKey key: Key) throws -> [String: Int]? {
        try decodeIfPresent([String: Int].self, forKey: key).map { sizes in
            for (name, size) in sizes { _ = try checkedSize(size, forKey: key, naming: name) }
            return sizes
        }
    }

    private func checkedSize(_ size: Int, forKey key: Key, allowing special: Int? = nil, naming name: String? = nil) throws -> Int {
        guard size != special else { return size }
        let member = #""\#(key.stringValue)""# + (name.map { #" of "\#($0)""# } ?? "")
        if size < 0 { throw ImplausibleSize(reason: "\(member) is \(size): a size is never negative") }
        if size > ControlReply.largestPlausibleBytes {
            throw ImplausibleSize(reason: "\(member) is \(size): more than any memory (at most 2^57 bytes, 128 PiB)")
        }
        return size
    }
}

extension ControlReply: Codable {
    private enum CodingKeys: String, CodingKey {
        case ok, request, pid, report, error, cgroup, leaseMilliseconds
    }

    package func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(isSuccess, forKey: .ok)
        switch self {
        case .status(let status):
            try container.encode(ControlRequest.status.name, forKey: .request)
            try status.encode(to: encoder)
        case .released(let request, let pid, let report):
            try container.encode(request, forKey: .request)
            try container.encode(pid, forKey: .pid)
            try container.encode(report, forKey: .report)
        case .coordinated(let pid, let cgroupPath, let leaseMilliseconds):
            try container.encode(ControlRequest.coordinate(cgroupPath: "", lease: .zero).name, forKey: .request)
            try container.encode(pid, forKey: .pid)
            try container.encode(cgroupPath, forKey: .cgroup)
            try container.encode(leaseMilliseconds, forKey: .leaseMilliseconds)
        case .failure(let message):
            try container.encode(message, forKey: .error)
        }
    }

    package init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        guard try container.decode(Bool.self, forKey: .ok) else {
            self = .failure(try container.decode(String.self, forKey: .error))
            return
        }
        let request = try container.decode(String.self, forKey: .request)
        if request == ControlRequest.status.name {
            self = .status(try ControlStatus(from: decoder))
        } else if request == "coordinate" {
            self = .coordinated(
                pid: try container.decode(Int32.self, forKey: .pid), cgroupPath: try container.decode(String.self, forKey: .cgroup),
                leaseMilliseconds: try container.decode(Int.self, forKey: .leaseMilliseconds))
        } else {
            self = .released(
                request: request, pid: try container.decode(Int32.self, forKey: .pid),
                report: try container.decode(ReleaseReport.self, forKey: .report))
        }
    }
}

// MARK: Status

extension ControlStatus: Codable {
    private enum CodingKeys: String, CodingKey {
        case pid, level, usageBytes, limitBytes, cgroupPath, consumers
        case releases, releasedBytesByTier, releasedBytesByConsumer, memoryExhausted, forecastWarnings, falseForecasts
        case residentBytes, heapInUseBytes, coordinatedCgroups, releaseSeconds, monitorSources
    }

    /// Reads a reply; the figures added after the first release (releases, exhaustion,
    /// forecasts, process memory, the coordinated cgroups, the monitor's sources) may be missing,
    /// from an older endpoint.
    ///
    /// - Parameter decoder: the decoder to read from.
    /// - Throws: `DecodingError` for a missing or mistyped field of the first release.
    package init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            pid: try container.decode(Int32.self, forKey: .pid), level: try container.decode(MemoryPressureLevel.self, forKey: .level),
            usageBytes: try container.decodeIfPresent(UInt64.self, forKey: .usageBytes),
            limitBytes: try container.decodeIfPresent(UInt64.self, forKey: .limitBytes),
            cgroupPath: try container.decodeIfPresent(String.self, forKey: .cgroupPath),
            consumers: try container.decode([Consumer].self, forKey: .consumers))
        released.releases = try container.decodeIfPresent(Int.self, forKey: .releases) ?? 0
        released.freedBytesByTier = try container.decodeSizesIfPresent(forKey: .releasedBytesByTier) ?? [:]
        released.freedBytesByConsumer = try container.decodeSizesIfPresent(forKey: .releasedBytesByConsumer) ?? [:]
        let releaseSeconds = try container.decodeIfPresent(Double.self, forKey: .releaseSeconds) ?? 0
        guard releaseSeconds.isFinite, releaseSeconds >= 0 else {
            throw DecodingError.dataCorruptedError(
                forKey: .releaseSeconds, in: container, debugDescription: "releaseSeconds \(releaseSeconds) is not a duration")
        }
        released.seconds = releaseSeconds
        isMemoryExhausted = try container.decodeIfPresent(Bool.self, forKey: .memoryExhausted) ?? false
        forecasts.raised = try container.decodeIfPresent(Int.self, forKey: .forecastWarnings) ?? 0
        forecasts.falseAlarms = try container.decodeIfPresent(Int.self, forKey: .falseForecasts) ?? 0
        if let resident = try container.decodeIfPresent(UInt64.self, forKey: .residentBytes) {
            process = ProcessMemory(residentBytes: resident, heapInUseBytes: try container.decodeIfPresent(UInt64.self, forKey: .heapInUseBytes))
        }
        coordinatedCgroups = try container.decodeIfPresent([String].self, forKey: .coordinatedCgroups) ?? []
        monitorSources = try container.decodeIfPresent([String].self, forKey: .monitorSources) ?? []
    }

    /// Every key is present: unknown values are `null`.
    ///
    /// - Parameter encoder: the encoder to write to.
    /// - Throws: what the encoder throws.
    package func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(pid, forKey: .pid)
        try container.encode(level, forKey: .level)
        try container.encode(usageBytes, forKey: .usageBytes)
        try container.encode(limitBytes, forKey: .limitBytes)
        try container.encode(cgroupPath, forKey: .cgroupPath)
        try container.encode(consumers, forKey: .consumers)
        try container.encode(released.releases, forKey: .releases)
        try container.encode(released.freedBytesByTier, forKey: .releasedBytesByTier)
        try container.encode(released.freedBytesByConsumer, forKey: .releasedBytesByConsumer)
        try container.encode(released.seconds, forKey: .releaseSeconds)
        try container.encode(isMemoryExhausted, forKey: .memoryExhausted)
        try container.encode(forecasts.raised, forKey: .forecastWarnings)
        try container.encode(forecasts.falseAlarms, forKey: .falseForecasts)
        try container.encode(process?.residentBytes, forKey: .residentBytes)
        try container.encode(process?.heapInUseBytes, forKey: .heapInUseBytes)
        try container.encode(coordinatedCgroups, forKey: .coordinatedCgroups)
        try container.encode(monitorSources, forKey: .monitorSources)
    }
}

extension ControlStatus.Consumer: Codable {
    private enum CodingKeys: String, CodingKey {
        case name, tier, footprintBytes, inUseBytes
    }

    package init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            name: try container.decode(String.self, forKey: .name), tier: try container.decode(String.self, forKey: .tier),
            footprintBytes: try container.decodeSize(forKey: .footprintBytes), inUseBytes: try container.decodeSizeIfPresent(forKey: .inUseBytes))
    }

    package func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(name, forKey: .name)
        try container.encode(tier, forKey: .tier)
        try container.encode(footprintBytes, forKey: .footprintBytes)
        try container.encodeIfPresent(inUseBytes, forKey: .inUseBytes)
    }
}

// MARK: Release reports

/// A report as the control endpoint sends it: one JSON object, durations in microseconds.
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

/// A consumer's part as the control endpoint sends it.
extension ReleaseReport.Entry: Encodable {
    private enum CodingKeys: String, CodingKey {
        case consumer, tier, bytesBefore, bytesAfter, bytesFreed, durationMicroseconds, bytesInUse
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(consumer, forKey: .consumer)
        try container.encode(tier.name, forKey: .tier)
        try container.encode(bytesBefore, forKey: .bytesBefore)
        try container.encode(bytesAfter, forKey: .bytesAfter)
        try container.encode(bytesFreed, forKey: .bytesFreed)
        try container.encode(duration.microseconds, forKey: .durationMicroseconds)
        try container.encode(bytesInUse, forKey: .bytesInUse)
    }
}

/// Reads a report back from the JSON it encodes to (`memwarn trigger` reads endpoints' replies);
/// every size must lie within 0 and 2^57 bytes, 128 PiB (`targetBytes` may also be `Int.max`,
/// everything the level allows).
extension ReleaseReport: Decodable {
    private enum ReportKeys: String, CodingKey {
        case level, targetBytes, headroomBytes, growthBytesPerSecond, trimmedHeap, durationMicroseconds, entries
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: ReportKeys.self)
        self.init(
            level: try container.decode(MemoryPressureLevel.self, forKey: .level),
            targetBytes: try container.decodeSize(forKey: .targetBytes, allowing: .max),
            entries: try container.decode([Entry].self, forKey: .entries),
            trimmedHeap: try container.decode(Bool.self, forKey: .trimmedHeap),
            duration: .microseconds(try container.decode(Int64.self, forKey: .durationMicroseconds)))
        // Absent from endpoints of earlier versions.
        headroomBytes = try container.decodeSizeIfPresent(forKey: .headroomBytes) ?? 0
        growthBytesPerSecond = try container.decodeIfPresent(Double.self, forKey: .growthBytesPerSecond) ?? 0
    }
}

/// A consumer's part read back from an endpoint's reply.
extension ReleaseReport.Entry: Decodable {
    private enum EntryKeys: String, CodingKey {
        case consumer, tier, bytesBefore, bytesAfter, bytesFreed, durationMicroseconds, bytesInUse
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: EntryKeys.self)
        let tierName = try container.decode(String.self, forKey: .tier)
        guard let tier = ReleaseTier.all.first(where: { $0.name == tierName }) else {
            throw DecodingError.dataCorruptedError(forKey: .tier, in: container, debugDescription: "unknown tier \(tierName)")
        }
        self.init(
            consumer: try container.decode(String.self, forKey: .consumer), tier: tier,
            bytesBefore: try container.decodeSize(forKey: .bytesBefore),
            bytesAfter: try container.decodeSize(forKey: .bytesAfter),
            bytesFreed: try container.decodeSize(forKey: .bytesFreed),
            duration: .microseconds(try container.decode(Int64.self, forKey: .durationMicroseconds)),
            bytesInUse: try container.decodeSizeIfPresent(forKey: .bytesInUse) ?? 0)  // absent from earlier endpoints
    }
}

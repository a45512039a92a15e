#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A control endpoint's answer: one JSON object on one line, then the endpoint closes the
/// connection.
///
/// ```
/// {"ok":true,"request":"status","pid":42,"level":"normal","usageBytes":…,"limitBytes":…,"cgroupPath":…,"consumers":[{"name":…,"tier":…,"footprintBytes":…}]}
/// {"ok":true,"request":"warn","pid":42,"report":{…}}
/// {"ok":true,"request":"terminate-suspended","pid":42,"report":{…}}
/// {"ok":false,"error":"unknown request \"stop\" (expected status, warn or terminate-suspended)"}
/// ```
///
/// A report is ``ReleaseReport``'s JSON: `level`, `targetBytes`, `freedBytes`, `metTarget`,
/// `trimmedHeap`, `durationMicroseconds` and `entries` in the order the consumers were asked.
public enum ControlReply: Sendable, Hashable {
    /// The answer to ``ControlRequest/status``.
    case status(ControlStatus)
    /// The answer to a release request (`warn` or `terminate-suspended`, by name).
    case released(request: String, pid: Int32, report: ReleaseReport)
    /// A refusal or failure, with its reason.
    case failure(String)

    /// Whether the request succeeded.
    public var isSuccess: Bool {
        if case .failure = self { false } else { true }
    }

    /// The reply as one JSON object, keys sorted, without the newline.
    public var line: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // Every member encodes; a failure here would be a bug in the types above.
        guard let data = try? encoder.encode(self) else { return #"{"error":"the reply could not be encoded","ok":false}"# }
        return String(decoding: data, as: UTF8.self)
    }

    /// Reads a reply line.
    ///
    /// - Parameter line: the reply's JSON object, with or without its newline.
    /// - Throws: ``ControlError`` when the line is not a reply.
    public init(line: some Collection<UInt8>) throws(ControlError) {
        do {
            self = try JSONDecoder().decode(Self.self, from: Data(line))
        } catch {
            throw ControlError("unreadable reply from the endpoint: \(String(decoding: line.prefix(200), as: UTF8.self))")
        }
    }
}

extension ControlReply: Codable {
    private enum CodingKeys: String, CodingKey {
        case ok, request, pid, report, error
    }

    public func encode(to encoder: any Encoder) throws {
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
        case .failure(let message):
            try container.encode(message, forKey: .error)
        }
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        guard try container.decode(Bool.self, forKey: .ok) else {
            self = .failure(try container.decode(String.self, forKey: .error))
            return
        }
        let request = try container.decode(String.self, forKey: .request)
        if request == ControlRequest.status.name {
            self = .status(try ControlStatus(from: decoder))
        } else {
            self = .released(request: request, pid: try container.decode(Int32.self, forKey: .pid),
                             report: try container.decode(ReleaseReport.self, forKey: .report))
        }
    }
}

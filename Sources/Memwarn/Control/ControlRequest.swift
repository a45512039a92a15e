#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A request to a control endpoint: one JSON object on one line.
///
/// ```
/// {"request":"status"}
/// {"request":"warn","level":"warning","targetBytes":1048576}
/// {"request":"terminate-suspended"}
/// ```
///
/// `level` is `warning` (the default) or `critical`; `targetBytes` is optional and defaults
/// to everything the level allows (`Int.max`).
public enum ControlRequest: Sendable, Hashable {
    /// The monitor's latest level, usage and limit, and the coordinator's consumers.
    case status
    /// ``ReleaseCoordinator/release(level:targetBytes:tiers:)`` at `level`.
    case warn(level: MemoryPressureLevel, targetBytes: Int = .max)
    /// A `.critical` release of tier ``ReleaseTier/suspendedUnits`` only.
    case terminateSuspended(targetBytes: Int = .max)

    /// The longest request line an endpoint reads, newline excluded.
    public static let maximumLineBytes = 64 << 10

    /// The request's name on the wire: `status`, `warn` or `terminate-suspended`.
    public var name: String {
        switch self {
        case .status: "status"
        case .warn: "warn"
        case .terminateSuspended: "terminate-suspended"
        }
    }

    /// The request as one JSON object, without the newline (`targetBytes` only when not `Int.max`).
    public var line: String {
        var members = [#""request":"\#(name)""#]
        switch self {
        case .status:
            break
        case .warn(let level, let targetBytes):
            members.append(#""level":"\#(level.rawValue)""#)
            if targetBytes != .max { members.append(#""targetBytes":\#(targetBytes)"#) }
        case .terminateSuspended(let targetBytes):
            if targetBytes != .max { members.append(#""targetBytes":\#(targetBytes)"#) }
        }
        return "{" + members.joined(separator: ",") + "}"
    }

    /// Reads a request line (without its newline).
    ///
    /// - Parameter line: the request's JSON object.
    /// - Throws: ``ControlError`` for malformed JSON, a missing or mistyped member, an unknown
    ///   request, a bad level or a negative target.
    public init(line: some Collection<UInt8>) throws(ControlError) {
        let fields = try Self.fields(Data(line))
        let targetBytes = fields.targetBytes ?? .max
        guard targetBytes >= 0 else { throw ControlError("bad targetBytes \(targetBytes): it must be 0 or more") }
        switch fields.request {
        case "status":
            self = .status
        case "warn":
            let name = fields.level ?? MemoryPressureLevel.warning.rawValue
            guard let level = MemoryPressureLevel(rawValue: name), level != .normal else {
                throw ControlError(#"bad level "\#(name)" (expected warning or critical)"#)
            }
            self = .warn(level: level, targetBytes: targetBytes)
        case "terminate-suspended":
            self = .terminateSuspended(targetBytes: targetBytes)
        default:
            throw ControlError(#"unknown request "\#(fields.request)" (expected status, warn or terminate-suspended)"#)
        }
    }

    private struct Fields: Decodable {
        var request: String
        var level: String?
        var targetBytes: Int?
    }

    private static func fields(_ data: Data) throws(ControlError) -> Fields {
        do {
            return try JSONDecoder().decode(Fields.self, from: data)
        } catch DecodingError.keyNotFound(let key, _) {
            throw ControlError(#"malformed request: no "\#(key.stringValue)" member"#)
        } catch DecodingError.typeMismatch(_, let context), DecodingError.valueNotFound(_, let context) {
            let member = context.codingPath.last?.stringValue
            throw ControlError(member.map { #"malformed request: "\#($0)" has the wrong type"# } ?? Self.malformed)
        } catch {
            throw ControlError(Self.malformed)
        }
    }

    private static let malformed = #"malformed request: expected one JSON object on one line, such as {"request":"status"}"#
}

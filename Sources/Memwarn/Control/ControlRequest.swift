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
}

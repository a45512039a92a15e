package import MemwarnRelease

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
/// {"request":"coordinate","cgroup":"/kubepods.slice","leaseMilliseconds":5000}
/// ```
///
/// `level` is `warning` (the default) or `critical`; `targetBytes` is optional and defaults
/// to everything the level allows (`Int.max`).
package enum ControlRequest: Sendable, Hashable {
    /// The monitor's latest level, usage and limit, and the coordinator's consumers.
    case status
    /// ``/MemwarnRelease/ReleaseCoordinator/release(level:targetBytes:tiers:)`` at `level`.
    case warn(level: MemoryPressureLevel, targetBytes: Int = .max)
    /// A `.critical` release of tier ``/MemwarnRelease/ReleaseTier/suspendedUnits`` only.
    case terminateSuspended(targetBytes: Int = .max)
    /// From a node agent (`memwarn agent`): it coordinates the limit of `cgroupPath`, an ancestor
    /// of the service's memory cgroup (its path inside the memory mount), for `lease` (at most a
    /// minute; the agent renews it every second). The monitor leaves that limit out until the
    /// lease runs out; a lease of zero ends it at once. Refused for a cgroup that is not a proper
    /// ancestor of the service's own.
    case coordinate(cgroupPath: String, lease: Duration)

    /// How the refusal of a `coordinate` that will not change begins (the cgroup is no proper
    /// ancestor of the service's: a container's service does not see the pod's cgroups, say): an
    /// agent stops asking that service; any other refusal is worth asking again.
    package static let refusedForGood = "not coordinated: "

    /// The longest request line an endpoint reads, newline excluded.
    package static let maximumLineBytes = 64 << 10

    /// The request's name on the wire: `status`, `warn` or `terminate-suspended`.
    package var name: String {
        switch self {
        case .status: "status"
        case .warn: "warn"
        case .terminateSuspended: "terminate-suspended"
        case .coordinate: "coordinate"
        }
    }
}

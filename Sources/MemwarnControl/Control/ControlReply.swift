package import MemwarnRelease

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A control endpoint's answer: one JSON object on one line, then the endpoint closes the
/// connection.
///
/// ```
/// {"ok":true,"request":"status","pid":42,"level":"normal","usageBytes":…,"limitBytes":…,"cgroupPath":…,"consumers":[{"name":…,"tier":…,"footprintBytes":…,"inUseBytes":…}],
///  "releases":…,"releasedBytesByTier":{…},"releasedBytesByConsumer":{…},"memoryExhausted":false,"forecastWarnings":…,
///  "falseForecasts":…,"residentBytes":…,"heapInUseBytes":…,"coordinatedCgroups":["/shared.slice"],"monitorSources":[…]}
/// {"ok":true,"request":"warn","pid":42,"report":{…}}
/// {"ok":true,"request":"terminate-suspended","pid":42,"report":{…}}
/// {"ok":true,"request":"coordinate","pid":42,"cgroup":"/kubepods.slice","leaseMilliseconds":5000}
/// {"ok":false,"error":"unknown request \"stop\" (expected status, warn or terminate-suspended)"}
/// ```
///
/// A report is ``/MemwarnRelease/ReleaseReport``'s JSON: `level`, `targetBytes`, `freedBytes`, `metTarget`,
/// `trimmedHeap`, `durationMicroseconds` and `entries` in the order the consumers were asked.
package enum ControlReply: Sendable, Hashable {
    /// The answer to `status`.
    case status(ControlStatus)
    /// The answer to a release request (`warn` or `terminate-suspended`, by name).
    case released(request: String, pid: Int32, report: ReleaseReport)
    /// The answer to `coordinate(cgroupPath:lease:)`: the lease as granted.
    case coordinated(pid: Int32, cgroupPath: String, leaseMilliseconds: Int)
    /// A refusal or failure, with its reason.
    case failure(String)

    /// Whether the request succeeded.
    package var isSuccess: Bool {
        if case .failure = self { false } else { true }
    }
}

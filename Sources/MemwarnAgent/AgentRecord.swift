import MemwarnSystem

/// One decision or finding of the agent: a JSON line with `--json` (keys sorted, absent values
/// left out), else a line of text, in which every name and message from elsewhere (a socket's
/// path, a cgroup's name, a service's error) has its control characters escaped: no local user
/// can move root's cursor or forge a line of the agent's.
package struct AgentRecord: Encodable, Sendable {
    /// `started`, `watching` (how the parent's changes reach the agent), `found` (a socket's
    /// listener lies under the parent: a service from then on), `lost`, `round` (the order of a
    /// round of asks), `unreachable` (a socket whose exchange failed: `socket` holds its path),
    /// `unsearched` (a control directory that is not searched: `socket` holds its path),
    /// `unlinked`, `crossing`, `ask`, `unanswered`, `unrelievable` (the parent is over its mark
    /// with memory no service can give: no more asks until one can), `relieved`, `lease-refused`,
    /// `lease-unrenewed` (a renewal failed: said once until one succeeds), `metrics-unwritten`,
    /// `stopped`.
    package var event: String
    /// When, as ISO 8601 in UTC to the millisecond (`2026-11-22T00:21:31.481Z`), as every JSON
    /// line of memwarn's tools writes it (`memwarn watch` too).
    package var time: String
    package var pid: Int32?
    /// The service's memory cgroup (`unlinked`: the parent's child that holds none).
    package var cgroup: String?
    /// The socket or control directory a record is about (`found`, `unreachable`, `unsearched`).
    package var socket: String?
    package var level: String?
    /// The service's place in the order of the round (1: the largest).
    package var rank: Int?
    /// The service's kernel-measured usage when it was asked (its cgroup's, or its RSS when it
    /// shares a cgroup with another service).
    package var serviceUsageBytes: UInt64?
    package var targetBytes: Int?
    /// What the service said it freed (its release report): told, not believed.
    package var reportedFreedBytes: Int?
    /// What the kernel shows it freed: its usage before the ask minus after.
    package var measuredFreedBytes: Int64?
    package var parentUsageBytes: UInt64?
    package var parentAfterBytes: UInt64?
    package var parentLimitBytes: UInt64?
    /// `unrelievable`: what the services say they could give at the level, all together.
    package var canGiveBytes: UInt64?
    /// `unrelievable`: the parent's usage that no memwarn service holds (page cache, processes
    /// without memwarn): the parent's usage less its services' kernel-measured usage.
    package var heldElsewhereBytes: UInt64?
    package var measure: String?
    package var milliseconds: Double?
    package var asks: Int?
    package var reason: String?
    /// A round's order: the services, largest first by kernel-measured usage.
    package var order: [Ranked]?

    /// One service in a round's order.
    package struct Ranked: Encodable, Sendable {
        package var pid: Int32
        package var cgroup: String
        package var usageBytes: UInt64
    }

    init(_ event: String) {
        self.event = event
        time = ISO8601Time.now()
    }

    /// The record as a line of text, every name and message from elsewhere escaped
    /// (``/MemwarnSystem/TerminalText/escaped(_:)``).
    package var text: String {
        func size(_ bytes: UInt64?) -> String { bytes.map(ByteSize.describe) ?? "?" }
        func signed(_ bytes: Int64?) -> String { bytes.map { ($0 < 0 ? "-" : "") + ByteSize.describe($0.magnitude) } ?? "?" }
        func safe(_ text: String?) -> String { TerminalText.escaped(text ?? "?") }
        let ms = milliseconds.map { String(format: "%.1f ms", $0) } ?? ""
        let reason = safe(self.reason ?? "")
        switch event {
        case "started":
            return "agent: guarding \(safe(measure)): \(size(parentUsageBytes)) of \(size(parentLimitBytes))"
        case "found":
            return "found: process \(pid ?? 0) in \(safe(cgroup)) (\(safe(socket)))"
        case "lost":
            return "lost: process \(pid ?? 0) (\(reason))"
        case "unlinked":
            return "not linked: \(safe(cgroup)) holds \(size(serviceUsageBytes)) with no memwarn service (listed, never asked)"
        case "crossing":
            return "crossing: \(safe(measure)) at \(size(parentUsageBytes)) of \(size(parentLimitBytes)) (\(level ?? "?"))"
        case "ask":
            return "ask #\(rank ?? 0) \(level ?? "?"): process \(pid ?? 0) (\(size(serviceUsageBytes))) freed \(signed(measuredFreedBytes)) "
                + "(reported \(reportedFreedBytes.map { ByteSize.describe(reported: $0) } ?? "?")); parent \(size(parentUsageBytes)) -> \(size(parentAfterBytes)) in \(ms)"
        case "unanswered":
            return "no answer: process \(pid ?? 0) (\(level ?? "?")) after \(ms): \(reason)"
        case "unrelievable":
            return "nothing to give: \(safe(measure)) at \(size(parentUsageBytes)) of \(size(parentLimitBytes)); its services can give \(size(canGiveBytes)) "
                + "at \(level ?? "?"), \(size(heldElsewhereBytes)) is held by no memwarn service (page cache, processes without memwarn); "
                + "no more asks until a service has something to give"
        case "relieved":
            return "relieved: under the recovery mark \(ms) after the crossing, \(asks ?? 0) asks, \(signed(measuredFreedBytes)) freed"
        case "round":
            return "round: " + (order ?? []).map { "\($0.pid) (\(ByteSize.describe($0.usageBytes)))" }.joined(separator: ", ")
        case "unreachable":
            return "unreachable: \(safe(socket)) (\(reason)); tried again after 250 ms, then less often (at most every 5 s)"
        case "unsearched":
            return "not searched: \(safe(socket)) (\(reason))"
        case "watching":
            return "watching: \(reason)"
        case "lease-unrenewed":
            return "lease not renewed: process \(pid ?? 0): \(reason)"
        case "lease-refused":
            return "lease refused: process \(pid ?? 0): \(reason)"
        default:
            return "\(event)" + (self.reason.map { ": \(safe($0))" } ?? "")
        }
    }
}

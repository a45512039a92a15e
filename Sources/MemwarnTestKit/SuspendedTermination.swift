/// What an automatic critical release must have terminated, read from its report as
/// `memwarn-lifecycle-probe` prints it (the control wire format's release report).
///
/// The release's target is usage back to the recovery mark plus headroom for the growth the
/// monitor measured, and a test's ballast is growth to the monitor: how much headroom depends on
/// how fast the ballast went in, so a test cannot name the terminated units beforehand. It can
/// name them from the report: the suspended units, largest first, until what the release freed
/// before them and theirs reach the target — no more, no fewer.
public struct SuspendedTermination: Sendable {
    /// The units that must have been terminated, in order, with their sizes.
    public let units: [(id: String, bytes: Int)]
    /// The report's target.
    public let targetBytes: Int
    /// The part of the target that is growth headroom.
    public let headroomBytes: Int
    /// Whether the target can have been met: what was freed before the suspended units, and all
    /// of them, reach it.
    public let canMeetTarget: Bool

    /// Reads the target and what was freed before the first termination from `report`.
    ///
    /// - Parameters:
    ///   - report: the release report (`targetBytes`, `headroomBytes`, `entries` with `tier`
    ///     and `bytesFreed`).
    ///   - suspended: every suspended unit, largest first, with its size.
    /// - Throws: ``ChildProcessError`` when the report lacks its target or entries.
    public init(report: [String: Any], suspended: [(id: String, bytes: Int)]) throws {
        guard let target = report["targetBytes"] as? Int, let entries = report["entries"] as? [[String: Any]] else {
            throw ChildProcessError("a release report without targetBytes or entries: \(report)")
        }
        targetBytes = target
        headroomBytes = report["headroomBytes"] as? Int ?? 0
        let firstTermination = entries.firstIndex { $0["tier"] as? String == "suspended-units" } ?? entries.endIndex
        var freed = entries[..<firstTermination].reduce(0) { $0 + ($1["bytesFreed"] as? Int ?? 0) }
        var units: [(id: String, bytes: Int)] = []
        for unit in suspended where freed < target {
            units.append(unit)
            freed += unit.bytes
        }
        self.units = units
        canMeetTarget = freed >= target
    }

    /// The terminations `report` lists, as (unit id, bytes freed); the consumer is named
    /// `unit <id>`.
    public static func terminations(in report: [String: Any]) -> [(id: String, bytes: Int)] {
        let entries = report["entries"] as? [[String: Any]] ?? []
        return entries.filter { $0["tier"] as? String == "suspended-units" }.map { entry in
            let consumer = entry["consumer"] as? String ?? "?"
            return (consumer.hasPrefix("unit ") ? String(consumer.dropFirst("unit ".count)) : consumer, entry["bytesFreed"] as? Int ?? 0)
        }
    }
}

import Foundation
import MemwarnRelease

/// The text form of one process's release report, as `memwarn trigger` prints it. The sizes are
/// the endpoint's word (checked when its reply is read): each is shown clamped to 0 and above,
/// never trapping.
struct TriggerReport {
    /// The process as ``TriggerCommand/naming(_:)`` names it: `process 4242 (my-service)`.
    var process: String
    var report: ReleaseReport

    func text() -> String {
        let target = report.targetBytes == .max ? "everything the level allows" : StatusReport.bytes(UInt64(clamping: report.targetBytes))
        var lines = [
            "\(process): \(report.level) release, target \(target): freed \(StatusReport.bytes(UInt64(clamping: report.freedBytes))) "
                + "in \(Self.milliseconds(report.duration)) ms\(report.trimmedHeap ? " (heap trimmed)" : "")"
        ]
        guard !report.entries.isEmpty else { return (lines + ["nothing to release"]).joined(separator: "\n") }
        let rows =
            [["consumer", "tier", "before", "after", "freed", "ms"]]
            + report.entries.map { entry in
                [
                    entry.consumer, entry.tier.name, StatusReport.bytes(UInt64(clamping: entry.bytesBefore)),
                    StatusReport.bytes(UInt64(clamping: entry.bytesAfter)),
                    StatusReport.bytes(UInt64(clamping: entry.bytesFreed)), Self.milliseconds(entry.duration),
                ]
            }
        let widths = (0..<6).map { column in rows.map { $0[column].count }.max() ?? 0 }
        for row in rows {
            // Names left-aligned, numbers right-aligned.
            let cells = row.enumerated().map { column, cell in
                let padding = String(repeating: " ", count: widths[column] - cell.count)
                return column < 2 ? cell + padding : padding + cell
            }
            lines.append(cells.joined(separator: "  "))
        }
        let inUse = report.entriesInUse
        if !inUse.isEmpty {
            // Who gave back less than asked: memory in use (PurgeableData never ended, say).
            lines.append(
                "in use (asked for more than they gave): "
                    + inUse.map { "\($0.consumer) \(StatusReport.bytes(UInt64(clamping: $0.bytesInUse)))" }.joined(separator: ", "))
        }
        return lines.joined(separator: "\n")
    }

    static func milliseconds(_ duration: Duration) -> String {
        let (seconds, attoseconds) = duration.components
        return String(format: "%.1f", Double(seconds) * 1_000 + Double(attoseconds) / 1e15)
    }
}

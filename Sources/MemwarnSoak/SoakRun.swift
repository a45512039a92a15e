import MemwarnSystem

/// One run of the demo service under the soak's limit.
public struct SoakRun: Sendable, Codable {
    /// `memwarn` or `baseline`.
    public var label: String
    public var memwarnEnabled: Bool
    public var run: ConstrainedRunReport
    public var demo: DemoRecord

    /// It ran to the end of its load, was not OOM-killed, and exited 0.
    public var survived: Bool { run.exitCode == 0 && run.oomKills == 0 && demo.writesAcknowledged != nil }

    /// When it died, if it did (its run's duration).
    public var killedAfterSeconds: Double? { survived ? nil : run.durationSeconds }

    /// Why a run with memwarn did not survive, in a sentence; `nil` when it survived or ran
    /// without memwarn.
    public var killReason: String? {
        guard memwarnEnabled, !survived else { return nil }
        guard run.oomKills > 0 || run.exit.signal == 9 else {
            return "exited with status \(run.exitCode)" + (demo.otherLines.last.map { ": \($0)" } ?? "")
        }
        let limit = ByteSize.describe(run.memoryMaxBytes)
        guard let exhaustion = demo.exhaustions.last else {
            return "killed with no exhaustion reported: releasable memory was left, and the releases did not keep up with growth"
        }
        let floor = ByteSize.describe(UInt64(max(0, exhaustion.floorBytes)))
        let growth = ByteSize.describe(UInt64(max(0, exhaustion.growthBytesPerSecond)))
        if UInt64(max(0, exhaustion.floorBytes + exhaustion.growthBytesPerSecond)) >= run.memoryMaxBytes {
            return "killed: the floor, \(floor), plus one second of growth, \(growth), did not fit in \(limit)"
        }
        return "killed: memory was exhausted (floor \(floor) of \(limit), growing \(growth)/s) and the service kept growing past it"
    }
}

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
}

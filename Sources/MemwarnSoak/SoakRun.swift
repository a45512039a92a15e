import MemwarnSystem

/// One run of the soaked service under one limit: with memwarn, or without it (the baseline).
package struct SoakRun: Sendable, Codable {
    /// Why the run ended.
    package enum End: String, Sendable, Codable {
        /// `--duration` ran out; the soak stopped the service.
        case duration
        /// The load command ended; the soak stopped the service.
        case loadEnded = "load ended"
        /// The service ended by itself (the demo at the end of its load; a command, early).
        case serviceExited = "service exited"
        /// The service (a command) ended by itself with status 0 at the soak's end: after its
        /// time or its load ended, or at most the stop's grace before `--duration` was due (a
        /// tenth of the duration when that is shorter). It ran to the end.
        case finished = "service finished"
        /// Ctrl-C or SIGTERM: the soak stopped the service.
        case interrupted
        /// The service never became ready.
        case notReady = "not ready"
        /// The load command failed at once.
        case loadFailed = "load failed"
    }

    /// `memwarn` or `baseline`.
    package var label: String
    package var memwarnEnabled: Bool
    /// The limit of this run.
    package var memoryMaxBytes: UInt64
    package var run: ConstrainedRunReport
    /// The demo's own event lines (the demo soak only).
    package var demo: DemoRecord?
    /// What the service reported about itself while it ran.
    package var service: ServiceTelemetry
    /// The floor and its trend.
    package var trend: MemoryTrend
    package var end: End
    /// Seconds from the start until the service was ready.
    package var readyAfterSeconds: Double?
    /// The load command's exit status (128 + signal), when there was one.
    package var loadExitCode: Int32?
    /// The `--check` command's exit status, when it ran.
    package var checkExitCode: Int32?
    /// Why the soak could not be carried out in this run (not ready, load failed at once,
    /// exited 0 early): a sentence.
    package var problem: String?
    /// The service ignored SIGTERM at the end and was killed (SIGKILL) 10 s later.
    package var killedAtStop = false
    /// Memory pressure stall while it was loaded (`nil` without PSI).
    package var stall: MemoryStall?
    /// What surviving cost the service while it was loaded.
    package var cost = SurvivalCost()

    /// It survived without thrashing: a limit it can live at, not merely one it outlasted. A run
    /// too short to judge thrashing (``SurvivalCost/judgesThrashing``) is not seen thrashing: it
    /// ends the search for a limit, but no limit is recommended from it
    /// (``SoakReport/lowestComfortableLimit``).
    package var survivedComfortably: Bool { survived && !cost.isThrashing }

    /// It ran to the end under its limit: not OOM-killed, and (a command) still running when its
    /// time or its load ended and the soak stopped it, or ending by itself with status 0 then
    /// (``End/finished``), or (the demo) ended its load and exited 0 having verified its writes.
    /// An interrupted run did not run to the end.
    package var survived: Bool {
        guard problem == nil, run.oomKills == 0, end != .interrupted else { return false }
        if let demo { return run.exitCode == 0 && demo.writesAcknowledged != nil }
        return end == .duration || end == .loadEnded || end == .finished
    }

    /// Whether its data held: the demo lost no write; a command's `--check` exited 0 (`nil`:
    /// nothing checked it).
    package var dataHeld: Bool? {
        if let demo { return demo.lostWrites.map { $0 == 0 } }
        return checkExitCode.map { $0 == 0 }
    }

    /// When it died, if it did (its run's duration).
    package var killedAfterSeconds: Double? { survived ? nil : run.durationSeconds }

    /// Why a run with memwarn did not survive, in a sentence; `nil` when it survived or ran
    /// without memwarn.
    package var killReason: String? {
        guard memwarnEnabled, !survived else { return nil }
        if let problem { return problem }
        guard run.oomKills > 0 || run.exit.signal == 9 else {
            return "exited with status \(run.exitCode)" + (demo?.otherLines.last.map { ": \($0)" } ?? "")
        }
        let limit = ByteSize.describe(run.memoryMaxBytes)
        guard let exhaustion = demo?.exhaustions.last else {
            if service.exhaustedSeconds > 0 {
                return "killed while its monitor found memory exhausted (\(Int(service.exhaustedSeconds)) s in all): its floor did not fit in \(limit)"
            }
            if !service.linksMemwarn && demo == nil { return "OOM-killed under \(limit); no memwarn control endpoint answered, so what it released is unknown" }
            return Self.unexhaustedKillReason(service)
        }
        let floor = ByteSize.describe(UInt64(max(0, exhaustion.floorBytes)))
        let growth = ByteSize.describe(UInt64(max(0, exhaustion.growthBytesPerSecond)))
        // The demo's lines are another process's word: added without trapping.
        if UInt64(max(0, exhaustion.floorBytes.addingSaturating(exhaustion.growthBytesPerSecond))) >= run.memoryMaxBytes {
            return "killed: the floor, \(floor), plus one second of growth, \(growth), did not fit in \(limit)"
        }
        return "killed: memory was exhausted (floor \(floor) of \(limit), growing \(growth)/s) and the service kept growing past it"
    }

    /// Why a service whose monitor never found memory exhausted was killed: memory its
    /// consumers held in use (work in flight, which no release can give) when that was most of
    /// what they held at the endpoint's last answer; else releases that did not keep up.
    static func unexhaustedKillReason(_ service: ServiceTelemetry) -> String {
        let held = service.lastConsumers.lazy.map(\.footprintBytes).saturatingSum()
        guard let inUse = service.lastInUseBytes, inUse > 0 else {
            return "killed with no exhaustion reported: releasable memory was left, and the releases did not keep up with growth"
        }
        let holders = service.lastConsumers.filter { ($0.inUseBytes ?? 0) > 0 }.sorted { ($0.inUseBytes ?? 0) > ($1.inUseBytes ?? 0) }
            .prefix(3).map { "\($0.name) \(ByteSize.describe(UInt64($0.inUseBytes ?? 0)))" }.joined(separator: ", ")
        let describe = { (bytes: Int) in ByteSize.describe(UInt64(max(0, bytes))) }
        if inUse >= held - inUse {
            return "killed with no exhaustion reported: at the endpoint's last answer the consumers held \(describe(held)), "
                + "\(describe(inUse)) of it in use (\(holders)), which no release can give: the work in flight outgrew the limit, not the releases"
        }
        return "killed with no exhaustion reported: releasable memory was left (\(describe(held - inUse)) of the consumers' \(describe(held)) "
            + "at the endpoint's last answer), and the releases did not keep up with growth; \(describe(inUse)) more was in use (\(holders))"
    }

    /// Bytes released by tier: the demo's events, or the service's own count.
    package var releasedByTier: [String: Int] {
        if let demo, service.releasedBytesByTier.isEmpty { return demo.releasedByTier }
        return service.releasedBytesByTier
    }
}

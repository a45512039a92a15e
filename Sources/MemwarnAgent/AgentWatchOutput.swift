import CgroupKit
import MemwarnMonitor

/// What the engine watching the parent tells the agent, on the engine's thread: how the parent's
/// changes reach it (`watching`, again whenever that changes: the v1 thresholds registered, a
/// fallback taken). The readings themselves go to the rounds (``AgentRounds``).
final class AgentWatchOutput: MonitorEngineOutput {
    private let say: (AgentRecord) -> Void
    private var lines: [String] = []
    private var failing = false

    init(say: @escaping (AgentRecord) -> Void) {
        self.say = say
    }

    func engineEmitted(_ event: LevelEvent) {}
    func engineRead(_ reading: MonitorReading) {}
    func engineWatchesUsage(by watch: MonitorArming.UsageWatch, after: Duration) {}

    func engineListens(to sources: [String]) {
        guard sources != lines else { return }
        lines = sources
        var record = AgentRecord("watching")
        record.reason = sources.joined(separator: "; ")
        say(record)
    }

    func engineNoted(transientError: CgroupError?) {
        guard (transientError != nil) != failing else { return }  // said once an episode, and at its end
        failing = transientError != nil
        var record = AgentRecord(transientError == nil ? "reading-again" : "read-failing")
        record.reason = transientError.map { "\($0); the parent is read again after a back-off, its sources kept" }
        say(record)
    }
}

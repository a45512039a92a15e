import MemwarnMonitor

extension LevelEvent {
    /// The event in a few words for a verdict line: `warning<-normal by memory-events at 13.2% of 256.0 MiB`.
    var summary: String {
        let change = previous.map { "\(level.rawValue)<-\($0.rawValue)" } ?? "initial \(level.rawValue)"
        let percent = (snapshot.ratio * 1_000).rounded() / 10
        let limit = snapshot.limit.map { describe(bytes: $0.bytes) } ?? "no limit"
        return "\(change) by \(source.name) at \(percent)% of \(limit)"
    }
}

import MemwarnSystem

/// Where the agent's records go, one at a time: the watching thread and the roster's thread
/// both report, and a line is never interleaved with another.
final class RecordSink: @unchecked Sendable {
    // @unchecked: `emit` is called only with `lock` held.
    private let lock = Lock()
    private let emit: (AgentRecord) -> Void

    init(_ emit: @escaping (AgentRecord) -> Void) { self.emit = emit }

    func say(_ record: AgentRecord) {
        lock.withLock { emit(record) }
    }
}

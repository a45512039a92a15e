import Foundation
import MemwarnSystem

/// The demo's output: one JSON object a line on stdout, written whole, with the seconds since
/// the start in `t`.
final class EventLog: Sendable {
    private let start = ContinuousClock.now
    private let lock = Locked(())

    var seconds: Double {
        let (seconds, attoseconds) = (ContinuousClock.now - start).components
        return ((Double(seconds) + Double(attoseconds) / 1e18) * 1_000).rounded() / 1_000
    }

    func emit(_ event: String, _ fields: [String: any Sendable] = [:]) {
        var object: [String: Any] = fields
        object["event"] = event
        object["t"] = seconds
        guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]) else { return }
        lock.withLock { _ in FileHandle.standardOutput.write(data + Data("\n".utf8)) }
    }
}

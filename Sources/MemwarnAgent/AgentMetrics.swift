import MemwarnSystem

#if canImport(Glibc)
import Glibc
#endif

/// The agent's metrics in Prometheus's text format, written whole to a file after each change
/// (for node_exporter's textfile collector, or any scraper that reads a file):
///
/// | metric | kind | what |
/// |---|---|---|
/// | `memwarn_agent_services` | gauge | memwarn services found under the parent |
/// | `memwarn_agent_unlinked_cgroups` | gauge | the parent's children with no memwarn service |
/// | `memwarn_agent_parent_usage_bytes`, `memwarn_agent_parent_limit_bytes` | gauge | the guarded usage and its limit |
/// | `memwarn_agent_asks_total{cgroup,level}` | counter | asks, by service cgroup and level |
/// | `memwarn_agent_freed_bytes_total{cgroup}` | counter | kernel-measured bytes freed by asks |
/// | `memwarn_agent_last_ask_freed_bytes{cgroup}` | gauge | measured bytes freed by the last ask |
/// | `memwarn_agent_unanswered_total{cgroup}` | counter | asks that timed out or failed |
/// | `memwarn_agent_episodes_total` | counter | crossings of the warning mark |
/// | `memwarn_agent_relief_seconds` | gauge | the last episode: crossing to back under the recovery mark |
final class AgentMetrics {
    private let path: String
    private var gauges: [String: Double] = [:]
    private var counters: [String: Double] = [:]

    init(path: String) { self.path = path }

    func set(_ name: String, _ value: Double) { set(name, [], value) }
    func set(_ name: String, _ labels: [(String, String)], _ value: Double) { gauges[Self.series(name, labels)] = value }
    func add(_ name: String, _ labels: [(String, String)] = [], _ value: Double = 1) { counters[Self.series(name, labels), default: 0] += value }

    private static func series(_ name: String, _ labels: [(String, String)]) -> String {
        guard !labels.isEmpty else { return name }
        let escaped = labels.map { key, value in
            key + "=\""
                + value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
                .replacingOccurrences(of: "\n", with: "\\n") + "\""
        }
        return name + "{" + escaped.joined(separator: ",") + "}"
    }

    /// Writes every series (a temporary file renamed over the old one: a reader never sees half).
    ///
    /// - Throws: ``SystemError`` when the file cannot be written.
    func write() throws(SystemError) {
        var text = ""
        for (kind, table) in [("gauge", gauges), ("counter", counters)] {
            var typed = Set<String>()
            for (series, value) in table.sorted(by: { $0.key < $1.key }) {
                let name = String(series.prefix { $0 != "{" })
                if typed.insert(name).inserted { text += "# TYPE \(name) \(kind)\n" }
                text += "\(series) \(value.isInfinite ? "+Inf" : String(value))\n"
            }
        }
        let temporary = path + ".tmp"
        do {
            let file = try FileDescriptor.open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode: 0o644)
            try file.writeAll(Array(text.utf8))
        }
        try FileSystem.rename(temporary, to: path)
    }
}

import MemwarnSystem

/// The agent's metrics in Prometheus's text format, written whole to a file after each change
/// (for node_exporter's textfile collector, or any scraper that reads a file), each family with
/// its `# HELP` line (``AgentMetricFamilies``).
///
/// The per-service series (those with a `cgroup` label) name the
/// ``maximumNamedCgroups`` largest services of the latest round, the rest as
/// `cgroup="(other services)"`; a service that is lost, or no longer among the largest, has its
/// series removed.
final class AgentMetrics: @unchecked Sendable {
    // @unchecked: every table is read and written with `lock` held (the roster's thread and the
    // watching thread both report).
    private let path: String
    private let lock = Lock()
    private var gauges: [String: Double] = [:]
    private var counters: [String: Double] = [:]
    /// The cgroups whose series are named, at most ``maximumNamedCgroups``.
    private var named: Set<String> = []
    private var unwritten = false
    private let say: (AgentRecord) -> Void

    /// The most services with series of their own.
    static let maximumNamedCgroups = 64
    /// The `cgroup` label of the services beyond ``maximumNamedCgroups``.
    static let otherServices = "(other services)"

    init(path: String, say: @escaping (AgentRecord) -> Void = { _ in }) {
        self.path = path
        self.say = say
    }

    func set(_ name: String, _ value: Double) { set(name, [], value) }
    func set(_ name: String, _ labels: [(String, String)], _ value: Double) {
        lock.withLock { gauges[series(name, labels)] = value }
    }
    func add(_ name: String, _ labels: [(String, String)] = [], _ value: Double = 1) {
        lock.withLock { counters[series(name, labels), default: 0] += value }
    }

    /// A round's order, largest first: the largest services keep (or get) series of their own;
    /// the series of those that fall out are removed.
    func rank(_ cgroups: [String]) {
        lock.withLock {
            let next = Set(cgroups.prefix(Self.maximumNamedCgroups))
            for gone in named.subtracting(next) { removeSeries(of: gone) }
            named = next
        }
    }

    /// A service went: its series go with it.
    func forget(cgroup: String) {
        lock.withLock {
            guard named.remove(cgroup) != nil else { return }
            removeSeries(of: cgroup)
        }
    }

    private func removeSeries(of cgroup: String) {
        let label = Self.series("", [("cgroup", cgroup)]).dropFirst().dropLast()  // cgroup="…"
        func named(_ series: String) -> Bool { series.contains("{" + label + ",") || series.contains("{" + label + "}") }
        gauges = gauges.filter { !named($0.key) }
        counters = counters.filter { !named($0.key) }
    }

    private func series(_ name: String, _ labels: [(String, String)]) -> String {
        let folded = labels.map { key, value in
            key == "cgroup" && !named.contains(value) && named.count >= Self.maximumNamedCgroups ? (key, Self.otherServices) : (key, value)
        }
        for (key, value) in folded where key == "cgroup" && value != Self.otherServices { named.insert(value) }
        return Self.series(name, folded)
    }

    private static func series(_ name: String, _ labels: [(String, String)]) -> String {
        guard !labels.isEmpty else { return name }
        let escaped = labels.map { key, value in
            key + "=\""
                + value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
                .replacingOccurrences(of: "\n", with: "\\n") + "\""
        }
        return name + "{" + escaped.joined(separator: ",") + "}"
    }

    /// Writes the file; a failure is said once (``AgentRecord`` `metrics-unwritten`) until a
    /// write succeeds again.
    func publish() {
        let failure: SystemError? = lock.withLock {
            do throws(SystemError) {
                try writeLocked()
                unwritten = false
                return nil
            } catch {
                defer { unwritten = true }
                return unwritten ? nil : error
            }
        }
        guard let failure else { return }
        var record = AgentRecord("metrics-unwritten")
        record.reason = "\(failure)"
        say(record)
    }

    /// Writes every series now.
    ///
    /// - Throws: ``SystemError`` when the file cannot be written.
    func write() throws(SystemError) {
        try lock.withLock { () throws(SystemError) in try writeLocked() }
    }

    /// Writes every series (a new file renamed over the old one: a reader never sees half, and
    /// a symbolic link at the path is replaced, never written through).
    private func writeLocked() throws(SystemError) {
        var text = ""
        for (kind, table) in [("gauge", gauges), ("counter", counters)] {
            var typed = Set<String>()
            for (series, value) in table.sorted(by: { $0.key < $1.key }) {
                let name = String(series.prefix { $0 != "{" })
                if typed.insert(name).inserted {
                    if let family = AgentMetricFamilies.byName[name] { text += family.helpLine + "\n" }
                    text += "# TYPE \(name) \(kind)\n"
                }
                text += "\(series) \(value.isInfinite ? "+Inf" : String(value))\n"
            }
        }
        // A new file of a name nobody could guess, renamed over the old one: whoever may write
        // the textfile directory cannot point the write at another file (a link is replaced,
        // never followed).
        try FileSystem.replaceFile(path, with: Array(text.utf8), mode: 0o644)
    }
}

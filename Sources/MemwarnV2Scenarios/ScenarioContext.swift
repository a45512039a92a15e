import CgroupKit
import Logging
import Memwarn

/// What a scenario body works with: the products beside the runner, the cgroups it makes
/// (removed when it ends, passed or not), and the details its verdict line shows.
final class ScenarioContext: Sendable {
    /// The other products' paths.
    let products: ProductPaths
    /// The logger handed to monitors: errors only, to the console.
    let logger: Logger
    private let scenarioName: String
    private let notes = Locked<[String]>([])
    private let cgroups = Locked<[ScenarioCgroup]>([])
    private let endings = Locked<[@Sendable () async -> Void]>([])

    init(scenarioName: String, products: ProductPaths, logger: Logger) {
        self.scenarioName = scenarioName
        self.products = products
        self.logger = logger
    }

    /// Adds a detail to the verdict line (what was seen, such as which source raised a level).
    func note(_ text: String) {
        notes.withLock { $0.append(text) }
    }

    /// The details noted so far, in order.
    var details: [String] { notes.withLock { $0 } }

    /// Makes a cgroup below the cgroup2 root, named after the scenario, removed at its end.
    ///
    /// - Parameter memoryMax: its `memory.max` in bytes, or `nil` to leave it at `max`.
    func makeCgroup(memoryMax: Int? = nil) throws(CgroupError) -> ScenarioCgroup {
        let limit = memoryMax.map { [(file: "memory.max", value: String($0))] } ?? []
        let cgroup = try ScenarioCgroup(ScenarioCgroup.root.child("v2s-\(scenarioName)"), settings: limit)
        cgroups.withLock { $0.append(cgroup) }
        return cgroup
    }

    /// Runs `ending` when the scenario ends, passed or not (stopping a monitor it started).
    func atEnd(_ ending: @escaping @Sendable () async -> Void) {
        endings.withLock { $0.append(ending) }
    }

    /// Runs the endings, last first, then removes every cgroup the scenario made, with
    /// whatever still runs in them.
    func finish() async {
        for ending in endings.withLock({ $0.reversed() }) { await ending() }
        for cgroup in cgroups.withLock({ $0.reversed() }) { cgroup.remove() }
    }
}

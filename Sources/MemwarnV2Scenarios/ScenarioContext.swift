import CgroupKit
import Foundation
import Logging
import MemwarnSystem
import MemwarnTestKit

/// What a scenario body works with: the products beside the runner, the cgroups it makes
/// (removed when it ends, passed or not), and the details its verdict line shows.
final class ScenarioContext: Sendable {
    /// The other products' paths.
    let products: ProductPaths
    /// The logger handed to monitors: errors only, to the console.
    let logger: Logger
    private let scenarioName: String
    private let notes = Locked<[String]>([])
    private let cgroups = Locked<[TestCgroup]>([])
    private let endings = Locked<[@Sendable () async -> Void]>([])

    /// The cgroup2 mount's root (the init script mounts cgroup2 alone at `/sys/fs/cgroup`).
    static let cgroupRoot = CgroupLocation(version: .v2, mountPoint: "/sys/fs/cgroup", path: "/")

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
    func makeCgroup(memoryMax: Int? = nil) throws -> TestCgroup {
        let limit = memoryMax.map { [(file: "memory.max", value: String($0))] } ?? []
        let cgroup = try TestCgroup(at: Self.cgroupRoot.child("v2s-\(scenarioName)"), settings: limit)
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
        for cgroup in cgroups.withLock({ $0.reversed() }) { try? cgroup.remove() }
    }
}

extension ScenarioContext {
    /// A new cgroup with `memory.max` = `limit` bytes, and a hog started in it.
    func cgroupWithHog(memoryMax limit: Int) throws -> (cgroup: TestCgroup, hog: MemoryHog) {
        let cgroup = try makeCgroup(memoryMax: limit)
        return (cgroup, try MemoryHog(in: cgroup, binary: products.hog))
    }

    /// The runner's environment with `additions`, as a child's environment (`NAME=value` entries).
    static func environment(adding additions: [String: String]) -> [String] {
        ProcessInfo.processInfo.environment.merging(additions) { $1 }.map { "\($0.key)=\($0.value)" }
    }
}

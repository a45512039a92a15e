/// `memwarn-hog` in a cgroup: a process that holds exactly as much touched anonymous memory
/// as it is told (`hold <bytes>` on its stdin, `held <bytes> <start ns> <end ns>` back).
final class HogChild: Sendable {
    private let child: LineChild
    /// The cgroup's usage once the hog runs holding nothing: what the cgroup holds besides
    /// the hog's own memory (the process itself, its stack and heap).
    let baselineBytes: Int

    /// Starts a hog inside `cgroup` and waits until it is up, holding nothing.
    init(_ products: ProductPaths, in cgroup: ScenarioCgroup) async throws {
        child = try LineChild([products.hog], in: cgroup)
        _ = try await Self.exchange(child, holding: 0, within: .seconds(60))
        baselineBytes = Int(try cgroup.reader.usage())
    }

    /// The hog's pid.
    var pid: Int32 { child.pid }

    /// Grows or shrinks to `bytes` and waits until it is done (a throttled hog takes longer).
    ///
    /// - Returns: how long the change took, as the hog measured it.
    /// - Throws: ``ScenarioFailure`` when the hog died (an OOM kill) or answered otherwise.
    @discardableResult
    func hold(_ bytes: Int, within limit: Duration = .seconds(120)) async throws -> Duration {
        try await Self.exchange(child, holding: max(0, bytes), within: limit)
    }

    /// Grows or shrinks so that the cgroup's usage is `fraction` of `limit` (0 lets go of all).
    @discardableResult
    func hold(_ fraction: Double, of limit: Int) async throws -> Duration {
        try await hold(fraction == 0 ? 0 : Int(Double(limit) * fraction) - baselineBytes)
    }

    /// Asks it to hold `bytes` without waiting for the answer (for a hold that ends in an OOM kill).
    func startHolding(_ bytes: Int) throws {
        try child.send("hold \(bytes)")
    }

    /// Waits for it to end: its exit status, or 128 + the signal.
    func exitStatus(within limit: Duration = .seconds(60)) async throws -> Int32 {
        try await child.exitStatus(within: limit)
    }

    /// Ends it: closes its input and waits; kills it if it does not go.
    func stop() async {
        child.closeInput()
        if (try? await child.exitStatus(within: .seconds(10))) == nil { child.killIfRunning() }
    }

    private static func exchange(_ child: LineChild, holding bytes: Int, within limit: Duration) async throws -> Duration {
        try child.send("hold \(bytes)")
        let reply = try await child.nextLine(within: limit)
        let words = reply.split(separator: " ")
        guard words.count == 4, words[0] == "held", let start = UInt64(words[2]), let end = UInt64(words[3]) else {
            throw ScenarioFailure("the hog answered \"\(reply)\" to hold \(bytes)")
        }
        return .nanoseconds(Int64(end - start))
    }
}

extension ScenarioContext {
    /// A new cgroup with `memory.max` = `limit` bytes, and a hog started in it.
    func cgroupWithHog(memoryMax limit: Int) async throws -> (cgroup: ScenarioCgroup, hog: HogChild) {
        let cgroup = try makeCgroup(memoryMax: limit)
        return (cgroup, try await HogChild(products, in: cgroup))
    }
}

import CgroupKit
import MemwarnTestKit

/// Discovery and the effective limit on real cgroup v2 files, through `CgroupDiscovery` and
/// `CgroupMemoryReader`: the mode, a cgroup named both ways, a process's own cgroup from
/// `/proc/PID/cgroup` (`0::/path`), the lowest `memory.max` / `memory.high` up the tree, `max`
/// everywhere meaning no limit, and usage, peak, stat and events as the kernel writes them.
enum DiscoveryScenario {
    static let scenario = Scenario(name: "discovery-effective-limit", timeLimit: .seconds(120), body: run)

    static func run(_ context: ScenarioContext) async throws {
        let discovery = CgroupDiscovery()
        let mode = try discovery.mode(mounts: try discovery.mounts())
        try expect(mode == .v2, "the VM's cgroup mode is \(mode.rawValue), not v2")
        let rootControllers = try KernelFiles.host.read(ScenarioContext.cgroupRoot.file("cgroup.subtree_control"))
        try expect(rootControllers.split(separator: " ").contains { $0.hasPrefix("memory") }, "+memory is not on at the root: \(rootControllers)")

        let outer = try context.makeCgroup(memoryMax: 256 * mebibyte)
        let middle = try outer.child("middle", settings: [("memory.high", "\(128 * mebibyte)")])
        let leaf = try middle.child("leaf")
        try expect(try leaf.read("memory.max") == "max\n" && leaf.read("memory.high") == "max\n", "a new cgroup's limits do not read max")

        for path in [leaf.location.path, leaf.location.directory] {
            let layout = try discovery.layout(cgroupPath: path)
            try expect(
                layout.mode == .v2 && layout.memory == leaf.location && layout.unified == leaf.location,
                "layout(cgroupPath: \(path)) found memory \(String(describing: layout.memory)), unified \(String(describing: layout.unified))")
        }
        let reader = CgroupMemoryReader(location: leaf.location)
        try expectLimit(reader, 128 * mebibyte, "memory.high", middle, "an ancestor's memory.high")
        try leaf.set("memory.max", to: "\(64 * mebibyte)")
        try expectLimit(reader, 64 * mebibyte, "memory.max", leaf, "its own memory.max, below the ancestors'")
        try leaf.set("memory.max", to: "max")
        try middle.set("memory.high", to: "max")
        try expectLimit(reader, 256 * mebibyte, "memory.max", outer, "the outer memory.max once the inner limits read max")
        try outer.set("memory.max", to: "max")
        let none = try reader.effectiveLimit()
        try expect(none == nil, "every level reads max, yet the effective limit is \(String(describing: none))")
        context.note(
            "effective limit: 128 MiB (memory.high of \(middle.location.path)), 64 MiB (own memory.max), 256 MiB (outer memory.max), none when all read max")

        let hog = try MemoryHog(in: leaf, binary: context.products.hog)
        try await hog.hold(8 * mebibyte, within: .seconds(120))
        let own = try discovery.layout(pid: hog.pid)
        try expect(
            own.memory == leaf.location && own.unified == leaf.location,
            "a process in \(leaf.location.path) was placed in \(String(describing: own.memory?.path)) from /proc/\(hog.pid)/cgroup")
        let before = try CgroupValues.number(leaf.read("memory.current"), path: "memory.current")
        let usage = try reader.usage()
        let after = try CgroupValues.number(leaf.read("memory.current"), path: "memory.current")
        let slack = UInt64(mebibyte)
        try expect(
            usage >= 8 * UInt64(mebibyte) && usage + slack >= min(before, after) && usage <= max(before, after) + slack,
            "usage() read \(usage) while memory.current read \(before) and \(after)")
        let peak = try require(try reader.peakUsage(), "memory.peak is missing on kernel 6.1")
        try expect(peak >= usage, "peak \(peak) below usage \(usage)")
        let anonymous = try require(try reader.stat()["anon"], "memory.stat has no anon")
        try expect(anonymous >= 8 * UInt64(mebibyte), "memory.stat anon is \(anonymous), the hog holds 8 MiB")
        let events = try reader.events()
        try expect(events == MemoryEventCounters(), "memory.events should be all 0, is \(events)")
        context.note(
            "hog's own layout \(own.memory?.path ?? "?"); usage \(describe(bytes: usage)), peak \(describe(bytes: peak)), anon \(describe(bytes: anonymous)), events all 0"
        )
        await hog.stop()
    }

    private static func expectLimit(_ reader: CgroupMemoryReader, _ bytes: Int, _ file: String, _ cgroup: TestCgroup, _ what: String) throws {
        let limit = try reader.effectiveLimit()
        let expected = EffectiveLimit(bytes: UInt64(bytes), file: file, cgroupPath: cgroup.location.path)
        try expect(limit == expected, "expected \(what): \(expected), read \(String(describing: limit))")
    }
}

import CgroupKit
import Foundation
import MemwarnTestKit
import MemwarnTestTraits
import Synchronization
import Testing

/// `memwarn status --all`: every memory cgroup at and below one, with its level,
/// against real cgroups: a test cgroup with two children of their own limits.
@Suite(.serialized, .tags(.root, .cgroupV1), .needsRealCgroups)
struct StatusAllTests {
    static let memwarn = ChildProcess.productsDirectory + "/memwarn"
    static let mebibyte = 1 << 20
    /// PSI left out of the level: other suites may press on the machine meanwhile.
    static let environment =
        ProcessInfo.processInfo.environment.map { "\($0.key)=\($0.value)" }
        + ["MEMWARN_PSI_SOME_WARNING_PERCENT=100", "MEMWARN_PSI_FULL_CRITICAL_PERCENT=100"]

    static func status(_ arguments: [String]) throws -> ChildProcess.Finished {
        try ChildProcess.run([memwarn, "status"] + arguments, environment: environment)
    }

    static func array(_ text: String) throws -> [[String: Any]] {
        try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [[String: Any]], "\(text)")
    }

    /// A test cgroup (512 MiB) with the children `a` (64 MiB) and `b` (16 MiB); the children
    /// are removed before the test cgroup, also when the body throws.
    static func withFamily(_ body: (TestCgroup, MemoryCgroup, MemoryCgroup) async throws -> Void) async throws {
        try await withTestCgroup(limit: 512 << 20) { parent in
            let a = try MemoryCgroup(parent: parent.location, name: "a", maximumBytes: 64 << 20)
            defer { try? a.remove() }
            let b = try MemoryCgroup(parent: parent.location, name: "b", maximumBytes: 16 << 20)
            defer { try? b.remove() }
            try await body(parent, a, b)
        }
    }

    @Test func aCgroupNameWithControlCharactersIsEscapedNotPrinted() async throws {
        // Anyone who may make a cgroup names it; an escape sequence in the name
        // reached the terminal as it was.
        try await withTestCgroup(limit: 64 << 20) { parent in
            let forged = try TestCgroup(at: parent.location.child("evil\u{1b}[31mred\tx"))
            defer { try? forged.remove() }
            let text = try Self.status(["--all", "--cgroup", parent.location.path]).standardOutput
            #expect(!text.unicodeScalars.contains { $0.value == 0x1b || $0 == "\t" }, "\(text.debugDescription)")
            #expect(text.contains(#"/evil\x1b[31mred\x09x "#), "\(text.debugDescription)")
        }
    }

    @Test func everyCgroupBelowOneHasARowSortedByPathWithItsUsageLimitRatioAndLevel() async throws {
        try await Self.withFamily { parent, a, b in
            let hog = try MemoryHog()
            defer { hog.terminate() }
            try a.add(pid: hog.pid)
            try hog.hold(54 * Self.mebibyte)  // 84% of a's 64 MiB: between the warning and the critical mark
            let kernelUsage = try a.reader.usage()

            let json = try Self.status(["--all", "--json", "--cgroup", parent.location.path])
            #expect(json.status == 0, "\(json.standardError)")
            let rows = try Self.array(json.standardOutput)
            #expect(rows.map { $0["cgroupPath"] as? String } == [parent.location.path, a.location.path, b.location.path])
            #expect(rows.map { $0["limitBytes"] as? Int } == [512 << 20, 64 << 20, 16 << 20])
            #expect(rows.map { $0["level"] as? String } == ["normal", "warning", "normal"])
            #expect(rows.map { $0["measure"] as? String } == ["cgroup", "cgroup", "cgroup"])
            let usage = try #require(rows[1]["cgroupUsageBytes"] as? Int)
            #expect(abs(usage - Int(kernelUsage)) <= 2 * Self.mebibyte && usage >= 54 * Self.mebibyte, "\(usage) vs the kernel's \(kernelUsage)")
            #expect(rows[1]["usageBytes"] as? Int == usage, "measured against a limit, usage is the cgroup's own")
            #expect((rows[1]["ratio"] as? Double).map { abs($0 - Double(usage) / Double(64 << 20)) < 0.001 } == true)

            // The same objects `memwarn status --json` prints for each cgroup.
            let single = try Self.status(["--json", "--growth-sample", "0s", "--cgroup", a.location.path])
            #expect(single.status == 0, "\(single.standardError)")
            let one = try #require(try JSONSerialization.jsonObject(with: Data(single.standardOutput.utf8)) as? [String: Any])
            #expect(Set(one.keys) == Set(rows[1].keys))
            #expect(one["cgroupUsageBytes"] is Int && one["cgroupDirectory"] as? String == rows[1]["cgroupDirectory"] as? String)

            // The table: a header, then one row per cgroup in the same order.
            let text = try Self.status(["--all", "--cgroup", parent.location.directory])
            #expect(text.status == 0, "\(text.standardError)")
            let lines = text.standardOutput.split(separator: "\n").map { $0.split(separator: " ").map(String.init) }
            #expect(lines.first == ["path", "usage", "limit", "ratio", "level"])
            #expect(lines.dropFirst().map { $0.first } == [parent.location.path, a.location.path, b.location.path], "\(text.standardOutput)")
            let rowA = try #require(lines.dropFirst(2).first)
            #expect(Array(rowA.suffix(4)) == ["64.0", "MiB", rowA.suffix(2).first ?? "", "warning"], "\(text.standardOutput)")
            let percent = try #require(Double(rowA.suffix(2).first?.dropLast() ?? ""), "\(rowA)")
            #expect(percent >= 80 && percent < 90, "\(rowA)")
            #expect(lines.last.map { Array($0.suffix(4)) } == ["16.0", "MiB", "0.0%", "normal"], "\(text.standardOutput)")
        }
    }

    @Test func theDefaultIsThisProcesssOwnCgroupAndSlashIsTheWholeHierarchy() async throws {
        let own = try #require(try CgroupDiscovery().layout().memory)
        try await withTestCgroup(limit: 64 << 20) { cgroup in
            let mine = try Self.status(["--all", "--json"])
            #expect(mine.status == 0, "\(mine.standardError)")
            let paths = try Self.array(mine.standardOutput).compactMap { $0["cgroupPath"] as? String }
            #expect(paths.first == own.path, "the first row is the cgroup itself")
            #expect(paths.contains(cgroup.location.path))
            #expect(paths == paths.sorted())

            let whole = try Self.status(["--all", "--json", "--cgroup", "/"])
            #expect(whole.status == 0, "\(whole.standardError)")
            let all = try Self.array(whole.standardOutput).compactMap { $0["cgroupPath"] as? String }
            #expect(all.first == "/")
            #expect(all.contains(own.path) && all.contains(cgroup.location.path))
            #expect(all.count > paths.count)
        }
    }

    /// Cgroups made and removed while `status --all` walks are left out, never an error.
    @Test func cgroupsThatVanishWhileItWalksAreSkipped() async throws {
        try await withTestCgroup(limit: 64 << 20) { parent in
            let churn = Churn(parent: parent.location.directory)
            defer { churn.stop() }
            var sawChurn = 0
            for _ in 0..<30 {
                let result = try await ChildProcess.runOffThePool(
                    [Self.memwarn, "status", "--all", "--json", "--cgroup", parent.location.path],
                    environment: Self.environment)
                #expect(result.status == 0, "\(result.standardError)")
                // Only the leftovers of a `memwarn run` killed elsewhere (another suite's), which
                // every status removes, may be reported.
                let complaints = result.standardError.split(separator: "\n").filter { !$0.hasPrefix("memwarn status: removed ") }
                #expect(complaints.isEmpty, "\(result.standardError)")
                let paths = try Self.array(result.standardOutput).compactMap { $0["cgroupPath"] as? String }
                #expect(paths.first == parent.location.path)
                if paths.count > 1 { sawChurn += 1 }
            }
            churn.stop()
            #expect(churn.rounds > 0, "cgroups were made and removed meanwhile")
            #expect(try FileManager.default.contentsOfDirectory(atPath: parent.location.directory).filter { $0.hasPrefix("churn") }.isEmpty)
            print("status --all: \(sawChurn) of 30 walks met a churning cgroup; \(churn.rounds) made and removed")
        }
    }

    /// A thread that makes and removes `churn/inner` below a cgroup as fast as it can, until stopped.
    final class Churn: Sendable {
        private let stopping = Atomic<Bool>(false)
        private let finished = DispatchSemaphore(value: 0)
        private let counted = Atomic<Int>(0)
        private let running = Atomic<Bool>(true)

        var rounds: Int { counted.load(ordering: .relaxed) }

        init(parent: String) {
            Thread.detachNewThread { [self] in
                let outer = parent + "/churn"
                let inner = outer + "/inner"
                while !stopping.load(ordering: .relaxed) {
                    if mkdir(outer, 0o755) == 0 {
                        _ = mkdir(inner, 0o755)
                        rmdir(inner)
                        rmdir(outer)
                        counted.add(1, ordering: .relaxed)
                    }
                }
                rmdir(inner)
                rmdir(outer)
                finished.signal()
            }
        }

        /// Stops the thread and waits until it has removed what it made. Safe to call twice.
        func stop() {
            stopping.store(true, ordering: .relaxed)
            if running.exchange(false, ordering: .relaxed) { finished.wait() }
        }
    }
}

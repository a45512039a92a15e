import CgroupKit
import Foundation
import MemwarnTestKit
import MemwarnTestTraits
import Testing

/// The built `memwarn` binary, run as an operator would, against real cgroups.
@Suite(.serialized, .tags(.root, .cgroupV1), .needsRealCgroups)
struct CLITests {
    static let memwarn = ChildProcess.productsDirectory + "/memwarn"
    static let limit: UInt64 = 64 << 20

    static func object(_ line: String) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
    }

    @Test func statusJSONReportsTheLimitAndTheKernelsUsage() async throws {
        try await withTestCgroup(limit: Self.limit) { cgroup in
            let hog = try MemoryHog()
            try cgroup.add(pid: hog.pid)
            try hog.hold(20 << 20)
            let result = try ChildProcess.run([Self.memwarn, "status", "--json", "--cgroup", cgroup.location.path])
            let kernel = try cgroup.usage()
            #expect(result.status == 0, "\(result.standardError)")
            let status = try Self.object(result.standardOutput)
            #expect(status["limitBytes"] as? Int == 67_108_864)
            let usage = try #require(status["usageBytes"] as? Int)
            #expect(abs(usage - Int(kernel)) <= 2 << 20)
            #expect(usage >= 20 << 20)
            #expect(status["mode"] as? String == "hybrid")
            #expect(status["cgroupPath"] as? String == cgroup.location.path)
            #expect(status["level"] as? String == "normal")
            let psi = try #require(status["psi"] as? [String: Any])
            let some = try #require(psi["some"] as? [String: Any])
            #expect(some["avg10"] != nil && some["avg60"] != nil && some["avg300"] != nil && some["total"] != nil)
            #expect((status["ratio"] as? Double).map { abs($0 - Double(usage) / Double(Self.limit)) < 0.001 } == true)
            hog.terminate()
        }
    }

    /// `inactive_page_cache = ignore`: status measures the limit against usage less the page cache
    /// a file written from inside the cgroup left there, says so, and shows what it left out; a
    /// value that is neither `count` nor `ignore` is an error naming the variable.
    @Test func statusWithInactivePageCacheLeftOutShowsWhatWasLeftOut() async throws {
        try await withTestCgroup(limit: Self.limit) { cgroup in
            let file = FileManager.default.temporaryDirectory.appendingPathComponent("memwarn-status-page-cache-\(UUID().uuidString)").path
            defer { try? FileManager.default.removeItem(atPath: file) }
            let written = try ChildProcess.run(["/bin/dd", "if=/dev/zero", "of=\(file)", "bs=1M", "count=56", "conv=fsync", "status=none"], in: cgroup)
            try #require(written.status == 0, "\(written.standardError)")
            let environment = ProcessInfo.processInfo.environment.map { "\($0.key)=\($0.value)" }
            let ignoring = environment + ["MEMWARN_INACTIVE_PAGE_CACHE=ignore"]
            let result = try ChildProcess.run([Self.memwarn, "status", "--json", "--cgroup", cgroup.location.path], environment: ignoring)
            #expect(result.status == 0, "\(result.standardError)")
            let status = try Self.object(result.standardOutput)
            let limit = try #require((status["limits"] as? [[String: Any]])?.first)
            let leftOut = try #require(limit["inactiveFileBytes"] as? Int, "\(limit)")
            #expect(leftOut >= 40 << 20)
            // Usage less what was left out, within what the page cache and the kernel's per-CPU
            // charge batches move between the two reads.
            let raw = Int(try cgroup.usage())
            #expect(abs(try #require(status["usageBytes"] as? Int) + leftOut - raw) <= 2 << 20, "\(status["usageBytes"] ?? "-") + \(leftOut) against \(raw)")
            #expect(status["level"] as? String == "normal")
            #expect((status["notes"] as? [String])?.contains { $0.hasPrefix("inactive page cache is left out") } == true, "\(status)")
            let text = try ChildProcess.run([Self.memwarn, "status", "--cgroup", cgroup.location.path], environment: ignoring)
            #expect(text.standardOutput.contains("of inactive page cache) of "), "\(text.standardOutput)")
            let counted = try Self.object(try ChildProcess.run([Self.memwarn, "status", "--json", "--cgroup", cgroup.location.path]).standardOutput)
            #expect((counted["limits"] as? [[String: Any]])?.first?["inactiveFileBytes"] is NSNull, "present, null when counted")
            #expect(counted["level"] as? String != "normal", "counted, the page cache is past the warning mark")
            let bad = try ChildProcess.run(
                [Self.memwarn, "status", "--cgroup", cgroup.location.path], environment: environment + ["MEMWARN_INACTIVE_PAGE_CACHE=maybe"])
            #expect(bad.status != 0 && bad.standardError.contains("inactive_page_cache must be count or ignore"), "\(bad.standardError)")
        }
    }

    /// runc on a hybrid host mounts the v1 hierarchies only; the kernel still writes `0::/` in
    /// /proc/self/cgroup. memwarn in such a container must read its v1 limit and arm, not fail
    /// on the cgroup2 group it cannot place (it did: "no v2 mount shows this cgroup").
    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/unshare"), "needs util-linux's unshare"))
    func statusWhereTheKernelNamesACgroup2GroupThatNoMountShowsReadsTheV1Limit() async throws {
        try await withTestCgroup(limit: Self.limit) { cgroup in
            let script = #"umount -l /sys/fs/cgroup/unified && grep -q '^0::' /proc/self/cgroup && exec "$1" status --json"#
            let result = try ChildProcess.run(["/usr/bin/unshare", "--mount", "/bin/sh", "-c", script, "sh", Self.memwarn], in: cgroup)
            #expect(result.status == 0, "\(result.standardError)")
            let status = try Self.object(result.standardOutput)
            #expect(status["cgroupPath"] as? String == cgroup.location.path)
            #expect(status["limitBytes"] as? Int == Int(Self.limit))
            let notes = try #require(status["notes"] as? [String])
            #expect(notes.contains { $0.contains("the cgroup2 group / is left out") }, "\(notes)")
            let monitor = try #require(status["monitor"] as? [String: Any])
            #expect(monitor["error"] == nil, "the monitor arms: \(monitor)")
        }
    }

    /// `status --json` gives where each limit's marks lie; it gave only the limit and the ratio.
    @Test func statusJSONGivesEachLimitsMarksInBytesAndAsRatios() async throws {
        try await withTestCgroup(limit: Self.limit) { cgroup in
            let result = try ChildProcess.run([Self.memwarn, "status", "--json", "--growth-sample", "0s", "--cgroup", cgroup.location.path])
            #expect(result.status == 0, "\(result.standardError)")
            let limits = try #require(try Self.object(result.standardOutput)["limits"] as? [[String: Any]])
            let own = try #require(limits.first { $0["cgroup"] as? String == cgroup.location.path }, "\(limits)")
            #expect(own["limitBytes"] as? Int == Int(Self.limit))
            for limit in limits {
                let bytes = try #require(limit["limitBytes"] as? Int)
                let marks = try #require(limit["marks"] as? [String: [String: Any]], "\(limit)")
                #expect(Set(marks.keys) == ["warning", "critical", "recovery"], "\(marks)")
                for (name, mark) in marks {
                    let ratio = try #require(mark["ratio"] as? Double, "\(name): \(mark)")
                    #expect(mark["bytes"] as? Int == Int(Double(bytes) * ratio), "\(name): \(mark) of \(bytes)")
                }
                #expect(marks["warning"]?["ratio"] as? Double == 0.8 && marks["critical"]?["ratio"] as? Double == 0.9, "the default policy: \(marks)")
                #expect(marks["recovery"]?["ratio"] as? Double == 0.7)
            }
            #expect((own["marks"] as? [String: [String: Any]])?["warning"]?["bytes"] as? Int == 53_687_091, "80 % of 64 MiB")
        }
    }

    @Test func statusAcceptsTheAbsoluteMountPathToo() async throws {
        try await withTestCgroup(limit: Self.limit) { cgroup in
            let result = try ChildProcess.run([Self.memwarn, "status", "--json", "--cgroup", cgroup.location.directory])
            #expect(result.status == 0)
            #expect(try Self.object(result.standardOutput)["cgroupPath"] as? String == cgroup.location.path)
            let text = try ChildProcess.run([Self.memwarn, "status", "--cgroup", cgroup.location.directory])
            #expect(text.standardOutput.contains("of 64.0 MiB"))
            #expect(text.standardOutput.hasPrefix("level     normal"))
        }
    }

    @Test func watchJSONFollowsAProcessItDidNotStart() async throws {
        try await withTestCgroup(limit: Self.limit) { cgroup in
            let hog = try MemoryHog()
            try cgroup.add(pid: hog.pid)
            let overhead = Int(try cgroup.usage())
            let environment =
                ProcessInfo.processInfo.environment.map { "\($0)=\($1)" } + [
                    "MEMWARN_HOLD_TIME=300ms", "MEMWARN_PSI_SOME_WARNING_PERCENT=100", "MEMWARN_PSI_FULL_CRITICAL_PERCENT=100",
                ]
            let watch = try LineChild([Self.memwarn, "watch", "--json", "--cgroup", cgroup.location.path], environment: environment)
            var lines: [[String: Any]] = [try Self.object(watch.nextLine())]
            for fraction in [0.60, 0.85, 0.95] {
                try hog.hold(fraction, of: cgroup, besides: overhead)
                if fraction > 0.6 { lines.append(try Self.object(watch.nextLine())) }
            }
            try hog.hold(0)
            lines.append(try Self.object(watch.nextLine()))
            watch.signal(SIGINT)
            let status = try watch.waitForExit()
            #expect(status == 0, "memwarn watch should end cleanly on SIGINT")
            #expect(lines.map { $0["level"] as? String } == ["normal", "warning", "critical", "normal"])
            #expect(lines[0]["previous"] is NSNull)
            #expect(lines.dropFirst().map { $0["previous"] as? String } == ["normal", "warning", "critical"])
            // The kernel's events, or the sampling that watches usage until the thresholds are in
            // (about 0.3 s after arming) and in the guard bands below the marks.
            #expect(lines.dropFirst().allSatisfy { ["usage-threshold", "usage-sample", "pressure-level", "oom"].contains($0["source"] as? String) })
            #expect(lines.allSatisfy { $0["limitBytes"] as? Int == 67_108_864 && $0["usageBytes"] is Int })
            #expect(lines.allSatisfy { ($0["time"] as? String).map { ISO8601DateFormatter.fractional.date(from: $0) != nil } == true })
            hog.terminate()
        }
    }

    /// This process's own memory cgroup has no limit on these machines; elsewhere skipped, saying so.
    @Test(.needsUnlimitedOwnCgroup) func withoutALimitStatusJSONSaysNullAndMeasuresTheSystem() throws {
        let result = try ChildProcess.run([Self.memwarn, "status", "--json"])
        #expect(result.status == 0)
        let status = try Self.object(result.standardOutput)
        #expect(status["limitBytes"] is NSNull, "every key is present; no limit reads null")
        #expect(status["limitFile"] is NSNull)
        #expect(status["measure"] as? String == "system")
        #expect((status["systemTotalBytes"] as? Int ?? 0) > 0)
    }

    @Test func badArgumentsAndMissingCgroupsGiveAOneLineErrorAndAFailingStatus() throws {
        for arguments in [
            ["status", "--cgroup", "relative/path"], ["status", "--cgroup", "/memwarn-no-such-cgroup"], ["watch", "--cgroup", "/a/../b"],
            ["status", "--bogus"], ["status", "--config", "/nonexistent.conf"],
        ] {
            let result = try ChildProcess.run([Self.memwarn] + arguments)
            #expect(result.status >= 1, "\(arguments)")
            let firstLine = result.standardError.split(separator: "\n").first.map(String.init) ?? ""
            #expect(firstLine.hasPrefix("Error: "), "\(arguments): \(result.standardError)")
            #expect(result.standardOutput.isEmpty)
        }
    }
}

extension ISO8601DateFormatter {
    nonisolated(unsafe) static let fractional: ISO8601DateFormatter = {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter
    }()
}

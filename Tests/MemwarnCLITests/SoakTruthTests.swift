import CgroupKit
import Foundation
import MemwarnSystem
import MemwarnTestKit
import Testing

#if canImport(Glibc)
import Glibc
#endif

extension RunCommandTests.SoakServiceTests {
    // MARK: The soak tells the truth

    /// The processes running exactly `sleep SECONDS` (not those whose command line only mentions it).
    static func sleeping(_ seconds: String) -> [Int32] {
        ((try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []).compactMap { Int32($0) }.filter { pid in
            (try? String(contentsOfFile: "/proc/\(pid)/cmdline", encoding: .utf8)) == "sleep\u{0}\(seconds)\u{0}"
        }
    }

    /// A service written as the README teaches, leaking 60 MiB a minute beside a cache
    /// that its releases hold at the warning mark, soaked with and without its control endpoint.
    /// Without it, the troughs of its anonymous memory stay flat (the caches shrink as the leak
    /// grows): the soak said `steady`. It must say it cannot tell, and why.
    @Test func aLeakBehindReleasesWithNoEndpointIsUnknownNeverSteady() async throws {
        func soak(endpoint: Bool) async throws -> [String: Any] {
            let result = try await Self.soak(
                ["--memory-max", "128M", "--duration", "40s", "--ready-after", "1s", "--no-baseline", "--json", "--", Self.probe]
                    + ["--rate", "20", "--total", "100000", "--leak", "60"] + (endpoint ? ["--control", "default"] : []))
            #expect(result.status == 0, "\(result.errors)")
            return try #require((try Self.json(result.output)["runs"] as? [[String: Any]])?.first)
        }
        async let withEndpoint = soak(endpoint: true)
        async let withoutEndpoint = soak(endpoint: false)
        let (seen, unseen) = try await (withEndpoint, withoutEndpoint)
        let seenTrend = try #require(seen["trend"] as? [String: Any])
        let rate = (seenTrend["rateBytesPerMinute"] as? Double ?? 0) / 1_048_576
        // With its endpoint the floor is seen rising at the leak's rate (in 40 s, seven troughs: the
        // verdict may still be "warming up", as a short soak says; the rate is the point).
        #expect(
            ["leaking", "warming up"].contains(seenTrend["verdict"] as? String) && rate > 42 && rate < 78, "with its endpoint: \(seen["trendSummary"] ?? "")")
        // Polls with a release between the reads of anonymous memory give no floor sample, and are
        // counted: a few at most (one in 20 here with two CPU hogs beside it), never the floor's
        // ~39 samples.
        let leftOut = try #require(seenTrend["samplesLeftOut"] as? Int, "the JSON counts the samples left out: \(seenTrend)")
        #expect(leftOut <= 8, "a release between the reads is rare: \(leftOut) of about 39 polls left out")
        let trend = try #require(unseen["trend"] as? [String: Any])
        #expect(unseen["linksMemwarn"] as? Bool == false)
        #expect(trend["verdict"] as? String == "unknown: no control endpoint", "\(unseen["trendSummary"] ?? "")")
        #expect((trend["fallsUnderPressure"] as? Int ?? 0) >= 2, "\(trend)")
        #expect((unseen["trendSummary"] as? String ?? "").contains("the caches cannot be told from the floor"), "\(unseen)")
        // What made the old verdict steady: the troughs of anonymous memory hide the leak.
        let hidden = (trend["rateBytesPerMinute"] as? Double ?? 0) / 1_048_576
        #expect(hidden < 30, "the troughs rose \(hidden) MiB/min of the 60 leaked: \(trend["troughs"] ?? "")")
    }

    /// A service whose work ends a moment before the soak's end exits 0 by itself: it ran to the end.
    @Test func aServiceThatEndsByItselfAtTheSoaksEndRanToTheEndAndIsReported() async throws {
        // Ready at 0.5 s, the 10 s duration due at 10.5 s; the service ends at 10.3 s.
        let result = try await Self.soak([
            "--duration", "10s", "--ready-after", "0.5s", "--no-baseline", "--json", "--", "/bin/sh", "-c", "sleep 10.3; : 1014.5",
        ])
        #expect(result.status == 0, "an outcome, not bad input: \(result.errors)")
        #expect(!result.errors.contains("Error: "), "\(result.errors)")
        let run = try #require((try Self.json(result.output)["runs"] as? [[String: Any]])?.first)
        #expect(run["end"] as? String == "service finished" && run["survived"] as? Bool == true && run["problem"] == nil, "\(run)")
        #expect(try Self.soakCgroups(of: result.pid).isEmpty)
    }

    /// Bad input found once a run has started still reports what ran, in JSON too.
    @Test func aSoakThatCouldNotBeCarriedOutWritesTheReportOfWhatRanWithTheReason() async throws {
        let plot = Self.temporaryFile("not-carried-out.svg")
        defer { try? FileManager.default.removeItem(atPath: plot) }
        let result = try await Self.soak([
            "--duration", "30s", "--ready-after", "0.2s", "--json", "--plot", plot, "--load", "exit 3", "--", "/bin/sleep", "1015.5",
        ])
        #expect(result.status == 2, "\(result.errors)")
        let errorLines = result.errors.split(separator: "\n").filter { $0.hasPrefix("Error: ") }
        #expect(errorLines.count == 1 && errorLines[0].contains("the load command failed at once"), "\(result.errors)")
        let report = try Self.json(result.output)
        #expect(report["passed"] as? Bool == false)
        #expect((report["problem"] as? String ?? "").contains("the load command failed at once"), "the reason beside the report: \(report)")
        let runs = try #require(report["runs"] as? [[String: Any]])
        #expect(runs.map { $0["end"] as? String } == ["load failed"], "the run that ran; the baseline does not start: \(runs)")
        #expect(try String(contentsOfFile: plot, encoding: .utf8).contains("<svg"), "the plot is written too")
        #expect(try Self.soakCgroups(of: result.pid).isEmpty && Self.processes(marked: "1015.5").isEmpty)
    }

    /// `/bin/sleep` never links memwarn; its survival is not memwarn's.
    @Test func aServiceWithoutMemwarnIsNeverCreditedToMemwarn() async throws {
        let result = try await Self.soak(["--duration", "2s", "--ready-after", "0.2s", "--no-baseline", "--", "/bin/sleep", "1016.5"])
        #expect(result.status == 0, "\(result.errors)")
        #expect(!result.output.contains("with memwarn the service survived"), "\(result.output)")
        #expect(result.output.contains("memwarn was not in the service"), "\(result.output)")
        #expect(Self.processes(marked: "1016.5").isEmpty)
    }

    /// A socket named for the service's pid in the first directory searched, served by
    /// another process (a hard link to a decoy memwarn service's socket), hid the service's own
    /// endpoint in a later directory: the soak read the decoy's figures. The listener's pid
    /// (`SO_PEERCRED`) must be the service's.
    @Test func theServiceWatchBelievesOnlyTheServicesOwnEndpointAndTriesTheNextDirectory() async throws {
        // The decoy: a memwarn service of this test's, outside the soak, that releases nothing.
        let decoy = try LineChild([Self.probe, "--rate", "1", "--total", "1", "--control", "default", "--hold", "600"])
        defer {
            decoy.signal(SIGKILL)  // the decoy we started
            _ = try? decoy.waitForExit(timeout: .seconds(10))
        }
        var decoySocket: String?
        while decoySocket == nil {
            let line = try await decoy.nextLine(within: .seconds(60))
            if let event = try? Self.json(line), event["event"] as? String == "control" { decoySocket = event["socket"] as? String }
        }
        let socket = try #require(decoySocket)
        defer { try? FileManager.default.removeItem(atPath: socket) }  // the decoy is killed: it cannot
        let firstDirectory = String(socket[..<(socket.lastIndex(of: "/") ?? socket.endIndex)])
        // The service's own directory: this user's private /tmp/memwarn-<uid>.XXXXXX, searched after the default.
        let ownDirectory = try FileSystem.makeUniqueDirectory(template: "/tmp/memwarn-\(geteuid()).XXXXXX")
        defer { try? FileManager.default.removeItem(atPath: ownDirectory) }
        let pidFile = Self.temporaryFile("watch.pid")
        defer {
            if let pid = try? String(contentsOfFile: pidFile, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines) {
                try? FileManager.default.removeItem(atPath: firstDirectory + "/\(pid).sock")  // the planted link
            }
            try? FileManager.default.removeItem(atPath: pidFile)
        }
        let script = "echo $$ > \(pidFile); ln \(socket) \(firstDirectory)/$$.sock && exec \(Self.probe) --rate 20 --total 100000 --control \(ownDirectory)"
        let result = try await Self.soak([
            "--memory-max", "128M", "--duration", "8s", "--ready-after", "1s", "--no-baseline", "--json", "--", "/bin/sh", "-c", script,
        ])
        #expect(result.status == 0, "\(result.errors)")
        let run = try #require((try Self.json(result.output)["runs"] as? [[String: Any]])?.first)
        #expect(run["linksMemwarn"] as? Bool == true, "\(run)")
        #expect((run["releases"] as? Int ?? 0) > 0, "the service's own releases, not the decoy's none: \(run)")
        #expect(((run["releasedBytesByTier"] as? [String: Int])?["caches"] ?? 0) > 0, "\(run)")
        #expect(try Self.soakCgroups(of: result.pid).isEmpty)
    }

    /// A soak killed with SIGKILL cannot stop what its service and its load started; the
    /// next soak's start kills it, with the cgroups it is in. Made and cleaned in a test cgroup of
    /// this test's own (other suites' runs prune their cgroup's leftovers too).
    @Test func whatAKilledSoaksServiceAndLoadStartedIsKilledByTheNextSoaksStart() async throws {
        try await withTestCgroup(limit: 512 << 20) { parent in
            let markers = ["1030.5", "1031.5"]
            defer {
                for marker in markers { for pid in Self.sleeping(marker) { kill(pid, SIGKILL) } }  // ours, if the fix failed
                for name in (try? FileManager.default.contentsOfDirectory(atPath: parent.location.directory)) ?? [] where name.hasPrefix("memwarn-soak-") {
                    rmdir(parent.location.directory + "/" + name)
                }
            }
            // Each starts a child that ignores SIGTERM: the service's grandchild, and the load's.
            let ignoring = { (marker: String) in #"sh -c "trap '' TERM; exec sleep "# + marker + #"""# }
            let soak = try LineChild(
                [
                    Self.memwarn, "soak", "--duration", "120s", "--no-baseline", "--ready-after", "0.3s", "--load", ignoring(markers[1]) + " & wait",
                    "--", "/bin/sh", "-c", ignoring(markers[0]) + " & exec sleep 1032.5",
                ], in: parent)
            // Real processes in /proc, whose start raises no event here: looked for again and again.
            await #expect(throws: Never.self, "\(soak.standardErrorText)") {
                try await waitUntil(within: .seconds(30), every: .milliseconds(20), "the service's and the load's sleeps") {
                    markers.allSatisfy { !Self.sleeping($0).isEmpty }
                }
            }
            soak.signal(SIGKILL)  // the soak we started
            _ = try await soak.exitStatus(within: .seconds(60))
            let left = markers.flatMap { Self.sleeping($0) }
            #expect(left.count == 2, "what the service and the load started outlives the killed soak until the next starts: \(left)")

            let next = try await ChildProcess.runOffThePool(
                [Self.memwarn, "soak", "--duration", "1s", "--no-baseline", "--ready-after", "0.2s", "--", "/bin/sleep", "1033.5"], in: parent)
            #expect(next.status == 0, "\(next.standardError)")
            for marker in markers { #expect(Self.sleeping(marker).isEmpty, "the next soak's start killed sleep \(marker)") }
            let leftovers = try FileManager.default.contentsOfDirectory(atPath: parent.location.directory).filter { $0.hasPrefix("memwarn-soak-\(soak.pid)-") }
            #expect(leftovers.isEmpty, "and removed the killed soak's cgroups: \(leftovers)")
        }
    }
}

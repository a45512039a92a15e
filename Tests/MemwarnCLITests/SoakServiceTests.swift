import CgroupKit
import Foundation
import MemwarnTestKit
import MemwarnTestTraits
import Testing

extension RunCommandTests {
    /// `memwarn soak -- CMD`, run as a user would soak their own service, on real cgroups: the
    /// service is `memwarn-growth-probe` (written as the README teaches, with a control endpoint in
    /// the default directory) or plain commands; its load is a shell command. Every test checks that
    /// the soak left no cgroup and no process behind. Nested in the serialized `memwarn run` suite:
    /// a soak drives a 128 MiB cgroup to its limit, which beside the growth tests would measure both.
    @Suite(.serialized, .tags(.root, .cgroupV1), .needsRealCgroups)
    struct SoakServiceTests {
        static let memwarn = ChildProcess.productsDirectory + "/memwarn"
        static let probe = ChildProcess.productsDirectory + "/memwarn-growth-probe"
        static let demo = ChildProcess.productsDirectory + "/memwarn-demo"

        /// The soak cgroups a `memwarn soak` process made that still exist.
        static func soakCgroups(of pid: Int32) throws -> [String] {
            try FileManager.default.contentsOfDirectory(atPath: try RunCommandTests.ownCgroupDirectory()).filter { $0.hasPrefix("memwarn-soak-\(pid)-") }
        }

        /// Processes whose command line contains `marker` (a unique argument of this test's commands).
        static func processes(marked marker: String) -> [Int32] {
            ((try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []).compactMap { Int32($0) }.filter { pid in
                guard let line = try? String(contentsOfFile: "/proc/\(pid)/cmdline", encoding: .utf8) else { return false }
                return line.replacingOccurrences(of: "\0", with: " ").contains(marker)
            }
        }

        /// Runs `memwarn soak ARGS` to its end as a started child, so that its pid is known.
        static func soak(_ arguments: [String], environment: [String]? = nil) async throws -> (status: Int32, output: String, errors: String, pid: Int32) {
            let child = try LineChild([memwarn, "soak"] + arguments, environment: environment)
            let status = try await child.exitStatus(within: .seconds(240))
            await child.outputEnded(within: .seconds(10))
            return (status, child.standardOutputText, child.standardErrorText, child.pid)
        }

        static func json(_ text: String) throws -> [String: Any] {
            try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any], "\(text)")
        }

        static func temporaryFile(_ name: String) -> String { NSTemporaryDirectory() + "memwarn-soak-test-\(getpid())-\(name)" }

        // MARK: Acceptance: a service that links memwarn, with its load, and its baseline beside it

        @Test func aServiceThatLinksMemwarnSurvivesItsLoadAndTheBaselineIsReportedBesideIt() async throws {
            let loadLog = Self.temporaryFile("load.log")
            defer { try? FileManager.default.removeItem(atPath: loadLog) }
            // The load records the soak's variables, then lasts longer than the soak.
            let load = #"echo "$MEMWARN_SOAK_RUN $MEMWARN_SOAK_PID" >> "# + loadLog + "; exec sleep 1003.5"
            let result = try await Self.soak([
                "--memory-max", "128M", "--duration", "10s", "--ready-after", "1s", "--json", "--load", load, "--",
                Self.probe, "--rate", "20", "--total", "100000", "--control", "default",
            ])
            #expect(result.status == 0, "\(result.errors)")
            let report = try Self.json(result.output)
            #expect(report["passed"] as? Bool == true)
            let runs = try #require(report["runs"] as? [[String: Any]])
            #expect(runs.map { $0["label"] as? String } == ["memwarn", "baseline"])
            let memwarn = runs[0]
            let baseline = runs[1]
            #expect(memwarn["survived"] as? Bool == true && memwarn["oomKills"] as? Int == 0 && memwarn["end"] as? String == "duration", "\(memwarn)")
            #expect(memwarn["linksMemwarn"] as? Bool == true, "the probe's control endpoint answered")
            #expect((memwarn["releases"] as? Int ?? 0) > 0, "the service's own releases were read: \(memwarn)")
            #expect(((memwarn["releasedBytesByTier"] as? [String: Int])?["caches"] ?? 0) > 0)
            #expect(((memwarn["releasedBytesByConsumer"] as? [String: Int])?["entries"] ?? 0) > 0, "by consumer: the probe's cache is named entries")
            // What survival cost, from the service's own counters: the probe
            // inserts 20 MiB/s and releases what passes the warning mark, so it releases about as
            // fast as it inserts once the cache is full; each release takes its own time.
            let cost = try #require(memwarn["cost"] as? [String: Any], "\(memwarn)")
            #expect((cost["releasesPerSecond"] as? Double ?? 0) > 0, "\(cost)")
            let perMinute = (cost["releasedBytesPerMinute"] as? Double ?? 0) / 1_048_576
            #expect(perMinute > 200 && perMinute < 1_500, "released \(perMinute) MiB/min of 1,200 inserted: \(cost)")
            #expect((cost["releasingShare"] as? Double ?? 0) > 0, "\(cost)")
            #expect(cost["requestsPerSecond"] == nil && cost["cacheMissRate"] == nil, "no /metrics: not reported, not 0: \(cost)")
            #expect(cost["thrashing"] == nil && cost["thrashingWindowSeconds"] == nil, "10 s is too short to judge thrashing: \(cost)")
            let stall = try #require(memwarn["stall"] as? [String: Any], "PSI over the loaded run: \(memwarn)")
            #expect(stall["source"] as? String == "system" && (stall["someSeconds"] as? Double ?? -1) >= 0, "v1 has no PSI of its own per cgroup: \(stall)")
            // The baseline: the same binary with MEMWARN_DISABLE=1 — memwarn linked but off.
            #expect(baseline["memwarnEnabled"] as? Bool == false)
            #expect(baseline["releases"] as? Int == 0, "memwarn off releases nothing: \(baseline)")
            #expect(baseline["survived"] as? Bool == false && (baseline["oomKills"] as? Int ?? 0) >= 1, "20 MiB/s into 128 MiB for 10 s: \(baseline)")
            let recorded = try String(contentsOfFile: loadLog, encoding: .utf8).split(separator: "\n").map { $0.split(separator: " ") }
            #expect(recorded.map { $0.first.map(String.init) } == ["memwarn", "baseline"], "the load ran beside each run, told which")
            #expect(recorded.allSatisfy { $0.count == 2 && Int32($0[1]) != nil })
            #expect(try Self.soakCgroups(of: result.pid).isEmpty)
            #expect(Self.processes(marked: "1003.5").isEmpty, "the load's process group was ended")
        }

        @Test func aServiceWithoutMemwarnIsReportedAsSuchWithItsUsageAndTheReadyURLIsPolled() async throws {
            let port = try Self.freePort()
            let result = try await Self.soak([
                "--memory-max", "64M", "--duration", "3s", "--no-baseline", "--json", "--ready-url", "http://127.0.0.1:\(port)/",
                "--load", "exec sleep 1004.5", "--", "/usr/bin/python3", "-m", "http.server", "\(port)", "--bind", "127.0.0.1",
            ])
            #expect(result.status == 0, "\(result.errors)")
            let run = try #require((try Self.json(result.output)["runs"] as? [[String: Any]])?.first)
            #expect(run["linksMemwarn"] as? Bool == false && run["releases"] as? Int == 0, "\(run)")
            #expect(run["survived"] as? Bool == true && run["readyAfterSeconds"] as? Double != nil, "\(run)")
            let text = try await Self.soak([
                "--memory-max", "64M", "--duration", "2s", "--no-baseline", "--ready-url", "http://127.0.0.1:\(port)/",
                "--", "/usr/bin/python3", "-m", "http.server", "\(port)", "--bind", "127.0.0.1",
            ])
            #expect(text.output.contains("no control endpoint answered"), "\(text.output)")
            #expect(Self.processes(marked: "1004.5").isEmpty)
        }

        static func freePort() throws -> Int {
            let result = try ChildProcess.run([
                "/usr/bin/python3", "-c", "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])",
            ])
            return try #require(Int(result.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines)))
        }

        // MARK: Several limits

        @Test func limitsFindTheLowestSurvivingLimitWithinOneStepAndStopOnceItSurvived() async throws {
            // 40 MiB that no release gives back, plus the runtime: 24 MiB cannot hold it, 56 MiB can.
            let result = try await Self.soak([
                "--limits", "88M,24M,56M", "--duration", "4s", "--ready-after", "2s", "--no-baseline", "--json", "--",
                Self.probe, "--floor", "40", "--rate", "2", "--total", "100000", "--control", "default",
            ])
            #expect(result.status == 0, "\(result.errors)")
            let report = try Self.json(result.output)
            #expect(report["limits"] as? [Int] == [24 << 20, 56 << 20, 88 << 20], "smallest first")
            let lowest = try #require(report["lowestSurvivingLimit"] as? [String: Any])
            #expect(lowest["memwarn"] as? Int == 56 << 20 && lowest["baseline"] is NSNull, "\(report)")
            #expect(report["memoryMaxBytes"] == nil, "with several limits, each run has its own")
            let runs = try #require(report["runs"] as? [[String: Any]])
            #expect(runs.map { $0["memoryMaxBytes"] as? Int } == [24 << 20, 56 << 20], "88M is not run once 56M survived")
            #expect(runs.first?["survived"] as? Bool == false)
            #expect(try Self.soakCgroups(of: result.pid).isEmpty)
        }

        // MARK: Bad input: a reason, exit 2, the report of what ran, nothing left

        @Test(arguments: [
            (["--ready-after", "1s", "--", "/nonexistent/service-1005.5"], "command not found"),
            (
                ["--ready-url", "http://127.0.0.1:1/", "--ready-timeout", "1s", "--", "/bin/sleep", "1006.5"],
                "did not answer http://127.0.0.1:1/ with 2xx within 1 s"
            ),
            (["--ready-after", "0.2s", "--load", "exit 3", "--", "/bin/sleep", "1007.5"], "the load command failed at once: it exited with status 3"),
            (["--ready-after", "0.2s", "--", "/bin/sh", "-c", "sleep 0.8; : 1008.5"], "exited with status 0 after"),
            (["--ready-after", "2s", "--", "/bin/true"], "exited with status 0"),
            (["--memory-max", "2M", "--ready-after", "3s", "--", probe, "--floor", "20", "--start-after", "1009.5"], "is below what it needs to start"),
        ])
        func aBadSetupGivesItsReasonExitsTwoAndLeavesNothing(arguments: [String], reason: String) async throws {
            // 30 s: a service that exits 0 at 0.8 s is far from its end (near it, that is an outcome).
            let result = try await Self.soak(["--duration", "30s"] + arguments)
            #expect(result.status == 2, "\(arguments): \(result.errors)")
            let errorLines = result.errors.split(separator: "\n").filter { $0.hasPrefix("Error: ") }
            #expect(errorLines.count == 1 && errorLines[0].contains(reason), "\(result.errors)")
            if reason == "command not found" {
                #expect(result.output.isEmpty, "nothing ran: nothing to report")
            } else {
                // Found once the service had started: the report of what ran, with the reason.
                #expect(result.output.hasPrefix("memwarn soak: "), "\(arguments): \(result.output)")
                #expect(result.output.contains("NOT CARRIED OUT: ") && result.output.contains(reason), "\(result.output)")
            }
            #expect(try Self.soakCgroups(of: result.pid).isEmpty)
            for marker in ["1005.5", "1006.5", "1007.5", "1008.5", "1009.5"] { #expect(Self.processes(marked: marker).isEmpty, "\(marker)") }
        }

        @Test func badArgumentsAreRefusedWithOneLineAndStatus64() throws {
            for arguments in [
                ["--ready-url", "http://127.0.0.1/"], ["--load", "x"], ["--ready-url", "http://example.com/", "--", "/bin/true"],
                ["--limits", "1M,lots", "--", "/bin/true"],
                ["--memory-max", "64M", "--limits", "64M", "--", "/bin/true"], ["--ready-url", "https://x/", "--", "/bin/true"],
                ["--ready-url", "http://127.0.0.1/", "--ready-after", "1s", "--", "/bin/true"], ["--duration", "2h1m", "--", "/bin/true"],
                ["--limits", "64M,64M", "--", "/bin/true"], ["--load", " ", "--", "/bin/true"],
            ] {
                let result = try ChildProcess.run([Self.memwarn, "soak"] + arguments)
                #expect(result.status == 64, "\(arguments): \(result.standardError)")
                #expect(result.standardError.hasPrefix("Error: "), "\(arguments): \(result.standardError)")
            }
        }

        @Test func aServiceThatCrashesMidSoakDidNotSurviveEvenWhenItsLoadEndsFirst() async throws {
            // The load ends the moment the service is gone — before the soak has reaped it.
            let load = "while kill -0 $MEMWARN_SOAK_PID 2>/dev/null; do sleep 0.05; done"
            let result = try await Self.soak([
                "--duration", "30s", "--ready-after", "0.3s", "--no-baseline", "--json", "--load", load, "--",
                "/bin/sh", "-c", "sleep 1.5; exit 3; : 1013.5",
            ])
            #expect(result.status == 1, "a crash is a failure, not a setup error: \(result.errors)")
            let run = try #require((try Self.json(result.output)["runs"] as? [[String: Any]])?.first)
            #expect(run["survived"] as? Bool == false && run["end"] as? String == "service exited" && run["exitCode"] as? Int == 3, "\(run)")
            #expect((run["killReason"] as? String ?? "").contains("exited with status 3"))
            #expect(try Self.soakCgroups(of: result.pid).isEmpty)
        }

        // MARK: Interrupted

        @Test func sigtermEndsTheServiceAndTheLoadCleanlyAndReportsWhatRan() async throws {
            // The load interrupts the soak as it starts: memwarn soak is its parent.
            let result = try await Self.soak([
                "--duration", "60s", "--ready-after", "0.5s", "--json", "--load", "kill -TERM $PPID; exec sleep 1010.5",
                "--", "/bin/sleep", "1011.5",
            ])
            #expect(result.status == 143, "128 + SIGTERM: \(result.errors)")
            let report = try Self.json(result.output)
            #expect(report["interruptedBy"] as? Int == 15 && report["passed"] as? Bool == false)
            let runs = try #require(report["runs"] as? [[String: Any]])
            #expect(runs.map { $0["end"] as? String } == ["interrupted"], "the baseline does not start after an interruption")
            #expect(try Self.soakCgroups(of: result.pid).isEmpty)
            #expect(Self.processes(marked: "1010.5").isEmpty && Self.processes(marked: "1011.5").isEmpty)
        }

        @Test func sigtermWhileWaitingForReadinessIsAnInterruptionNotASetupError() async throws {
            // The service interrupts the soak (its parent) while the soak waits for a URL that never answers.
            let result = try await Self.soak([
                "--duration", "60s", "--ready-url", "http://127.0.0.1:1/", "--ready-timeout", "30s", "--json", "--",
                "/bin/sh", "-c", "kill -TERM $PPID; exec sleep 1012.5",
            ])
            #expect(result.status == 143, "\(result.errors)")
            #expect(!result.errors.contains("Error: "), "\(result.errors)")
            let report = try Self.json(result.output)
            #expect(report["interruptedBy"] as? Int == 15)
            #expect((report["runs"] as? [[String: Any]])?.map { $0["end"] as? String } == ["interrupted"])
            #expect(try Self.soakCgroups(of: result.pid).isEmpty && Self.processes(marked: "1012.5").isEmpty)
        }

        @Test func sigtermDuringTheDemoSoakRemovesItsDataFolderAndCgroup() async throws {
            // The demo is started through a script that interrupts the soak first.
            let wrapper = Self.temporaryFile("demo.sh")
            try "#!/bin/sh\nkill -TERM $PPID\nexec \(Self.demo) \"$@\"\n".write(toFile: wrapper, atomically: true, encoding: .utf8)
            chmod(wrapper, 0o755)
            defer { try? FileManager.default.removeItem(atPath: wrapper) }
            let folders = { Set((try? FileManager.default.contentsOfDirectory(atPath: NSTemporaryDirectory())) ?? []).filter { $0.hasPrefix("memwarn-soak-") } }
            let before = folders()
            let result = try await Self.soak(
                ["--duration", "30s", "--json"], environment: ProcessInfo.processInfo.environment.map { "\($0.key)=\($0.value)" } + ["MEMWARN_DEMO=\(wrapper)"])
            #expect(result.status == 143, "\(result.errors)")
            #expect(try Self.json(result.output)["interruptedBy"] as? Int == 15)
            #expect(folders().subtracting(before).isEmpty, "the demo's data folder is removed")
            #expect(try Self.soakCgroups(of: result.pid).isEmpty)
        }
    }
}

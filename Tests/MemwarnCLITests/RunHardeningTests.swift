import CgroupKit
import Foundation
import MemwarnSystem
import MemwarnTestKit
import Testing

#if canImport(Glibc)
import Glibc
#endif

extension RunCommandTests {
    /// `memwarn run` attacked: runs' cgroups left behind, a run in another PID namespace, a hang-up,
    /// a closed output pipe, a cgroup squatted under a run's name, a monitor that cannot arm, too few
    /// descriptors. Nested in the serialized `memwarn run` suite: these runs' cgroups must not meet
    /// its check that none is left.
    @Suite(.serialized)
    struct RunHardeningTests {
        static let memwarn = ChildProcess.productsDirectory + "/memwarn"

        /// `memwarn-run-` cgroups in our cgroup whose `memwarn` process is gone.
        static func deadRunCgroups() throws -> [String] {
            try FileManager.default.contentsOfDirectory(atPath: try RunCommandTests.ownCgroupDirectory()).filter { name in
                guard name.hasPrefix("memwarn-run-"), let owner = Int32(name.split(separator: "-")[2]) else { return false }
                return kill(owner, 0) != 0 && errno == ESRCH
            }
        }

        /// Whether a cgroup has no process left: waited for with `waitUntil`, since the kernel's
        /// cgroup v1 raises no event when its last process leaves.
        static func hasNoProcess(_ directory: String) throws -> Bool {
            try String(contentsOfFile: directory + "/cgroup.procs", encoding: .utf8).isEmpty
        }

        /// Leftovers are made and cleaned in a test cgroup of this test's own: every `memwarn
        /// status` and `run` removes dead runs' cgroups in its cgroup, and other suites run them
        /// in the test process's cgroup at the same time.
        @Test(arguments: ["run", "status"])
        func aRunKilledWithSIGKILLTakesItsCommandAlongAndTheNextRunOrStatusRemovesWhatItLeft(cleaner: String) async throws {
            try await withTestCgroup(limit: 512 << 20) { parent in
                defer { Self.removeRunCgroups(in: parent) }
                let run = try LineChild([Self.memwarn, "run", "--memory-max", "64M", "--", RunCommandTests.hog], in: parent)
                try run.send("hold \(8 << 20)")
                #expect(try await run.nextLine().hasPrefix("held "))
                let pid = run.pid
                let name = try #require(try Self.runCgroups(in: parent).first { $0.hasPrefix("memwarn-run-\(pid)-") })
                let leftover = parent.location.directory + "/" + name

                run.signal(SIGKILL)  // the memwarn run we started: it cannot clean up
                _ = try run.waitForExit()
                await #expect(throws: Never.self, "the command died with its memwarn run (PR_SET_PDEATHSIG)") {
                    try await waitUntil(within: .seconds(5), "no process left in \(leftover)") { try Self.hasNoProcess(leftover) }
                }
                #expect(FileManager.default.fileExists(atPath: leftover), "left behind")

                let next = try ChildProcess.run(
                    [Self.memwarn] + (cleaner == "run" ? ["run", "--memory-max", "32M", "--", "/bin/true"] : ["status"]), in: parent)
                #expect(next.status == 0, "\(next.standardError)")
                #expect(!FileManager.default.fileExists(atPath: leftover), "the leftover cgroup was removed")
                #expect(
                    next.standardError.contains("memwarn \(cleaner): removed \(leftover), left by memwarn pid \(pid), which is gone"),
                    "\(next.standardError)")
            }
        }

        /// A run started in a PID namespace of its own (`unshare --pid`, bwrap,
        /// systemd's `PrivatePIDs=`) names its cgroup by its pid there. `status` outside found no
        /// process with that pid, took the run for abandoned and SIGKILLed its command (137,
        /// like an OOM kill). The run's lock on its cgroup now proves it alive in every namespace.
        @Test func statusLeavesALiveRunInAnotherPIDNamespaceAlone() async throws {
            try await withTestCgroup(limit: 512 << 20) { parent in
                defer { Self.removeRunCgroups(in: parent) }
                let (run, pid) = try Self.runInOwnPIDNamespace(in: parent)
                try run.send("hold \(4 << 20)")
                #expect(try await run.nextLine(within: .seconds(60)).hasPrefix("held "))
                let runs = try Self.runCgroups(in: parent)
                let name = try #require(runs.first { $0.hasPrefix("memwarn-run-\(pid)-") }, "\(runs)")
                #expect(kill(pid, 0) != 0 && errno == ESRCH, "no process here has the run's pid")

                let status = try await ChildProcess.runOffThePool([Self.memwarn, "status"], in: parent)
                #expect(status.status == 0, "\(status.standardError)")
                #expect(!status.standardError.contains("removed"), "\(status.standardError)")
                #expect(FileManager.default.fileExists(atPath: parent.location.directory + "/" + name), "the live run's cgroup is still there")
                try run.send("hold \(8 << 20)")
                #expect(try await run.nextLine(within: .seconds(60)).hasPrefix("held "), "its command still answers")

                // The run killed (its namespace's init dies, and every process in it): a leftover
                // now, and removed.
                run.signal(SIGKILL)
                _ = try await run.exitStatus(within: .seconds(60))
                await #expect(throws: Never.self) {
                    try await waitUntil(within: .seconds(5), "no process left in \(name)") { try Self.hasNoProcess(parent.location.directory + "/" + name) }
                }
                let cleaner = try await ChildProcess.runOffThePool([Self.memwarn, "status"], in: parent)
                #expect(cleaner.status == 0, "\(cleaner.standardError)")
                #expect(!FileManager.default.fileExists(atPath: parent.location.directory + "/" + name), "\(cleaner.standardError)")
            }
        }

        /// `memwarn run --memory-max 64M -- memwarn-hog` in a new PID namespace, where its pid is
        /// one that no process has here: the namespace's shell starts throwaway processes until
        /// the next pid is that one (`unshare --kill-child`: the namespace ends with the returned child).
        /// The namespace gets its own `/proc` (`--mount-proc`), as a container, bwrap or systemd's
        /// `PrivatePIDs=` gives it: with the host's, a thread id names another process's (or no)
        /// `/proc` entry, and libdispatch's thread pool, which reads `/proc/<tid>/stat`, traps
        /// (SIGILL) now and then — in any Swift program there, memwarn or not.
        static func runInOwnPIDNamespace(in parent: TestCgroup) throws -> (LineChild, Int32) {
            guard let pid = (100..<30_000).first(where: { kill(Int32($0), 0) != 0 && errno == ESRCH }).map(Int32.init) else {
                throw ChildProcessError("no free pid below 30000")
            }
            let script = "i=2; while [ $i -lt \(pid) ]; do /bin/true; i=$((i+1)); done; '\(Self.memwarn)' run --memory-max 64M -- '\(RunCommandTests.hog)'"
            return (try LineChild(["/usr/bin/unshare", "--pid", "--fork", "--mount-proc", "--kill-child", "/bin/sh", "-c", script], in: parent), pid)
        }

        /// The `memwarn-run-` cgroups below a test cgroup.
        static func runCgroups(in parent: TestCgroup) throws -> [String] {
            try FileManager.default.contentsOfDirectory(atPath: parent.location.directory).filter { $0.hasPrefix("memwarn-run-") }
        }

        /// Removes what a failed test left below its test cgroup (empty cgroups: their commands
        /// died with their runs), so the test cgroup itself can go.
        static func removeRunCgroups(in parent: TestCgroup) {
            for name in (try? runCgroups(in: parent)) ?? [] { rmdir(parent.location.directory + "/" + name) }
        }

        @Test func aHangUpEndsTheRunAsSIGTERMDoesAndRemovesTheCgroup() throws {
            let run = try RunCommandTests.startRunWithHog()
            let pid = run.pid
            run.signal(SIGHUP)
            #expect(try run.waitForExit() == 128 + SIGTERM, "the command was told SIGTERM")
            #expect(try RunCommandTests.runCgroups(of: pid).isEmpty)
        }

        @Test func aClosedOutputPipeEndsTheRunCleanly() async throws {
            let before = Set(try Self.deadRunCgroups())
            // A reader that stops after 10 bytes: (memwarn run --memory-max 64M -- sleep 3 2>&1) | head -c 10
            let result = try await ChildProcess.runOffThePool(["/bin/sh", "-c", "('\(Self.memwarn)' run --memory-max 64M -- sleep 3 2>&1) | head -c 10"])
            #expect(result.status == 0)
            #expect(Set(try Self.deadRunCgroups()).subtracting(before).isEmpty, "no cgroup left behind by a run killed by SIGPIPE")
        }

        @Test func aCgroupThatAlreadyHasTheRunsNameIsNeverAdopted() async throws {
            // In a test cgroup of its own, where no other suite's status or run takes the squatted
            // cgroup (named as a run's, its owner gone) for a leftover.
            try await withTestCgroup(limit: 512 << 20) { parent in
                defer { Self.removeRunCgroups(in: parent) }
                let own = parent.location.directory
                let record = RunCommandTests.temporaryFile("squatted")
                defer { try? FileManager.default.removeItem(atPath: record) }
                // Someone else's cgroup under the name the run will pick first (its pid is the shell's: exec keeps it).
                let script = """
                    mkdir '\(own)'/memwarn-run-$$-1 && echo 1073741824 > '\(own)'/memwarn-run-$$-1/memory.limit_in_bytes \\
                    && echo '\(own)'/memwarn-run-$$-1 > '\(record)' && exec '\(Self.memwarn)' run --memory-max 64M -- /bin/true
                    """
                let result = try ChildProcess.run(["/bin/sh", "-c", script], in: parent)
                let squatted = try String(contentsOfFile: record, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
                #expect(result.status == 0, "\(result.standardError)")
                #expect(try String(contentsOfFile: squatted + "/memory.limit_in_bytes", encoding: .utf8) == "1073741824\n", "its limit untouched")
                #expect(!result.standardError.contains(squatted + ","), "the run used another name: \(result.standardError)")
            }
        }

        @Test func aRunWhoseMonitorFailsSaysSoOnStderrAndInTheReport() throws {
            let report = RunCommandTests.temporaryFile("unmonitored.json")
            defer { try? FileManager.default.removeItem(atPath: report) }
            // Too few descriptors for the monitor's event loop (it used to say nothing): the
            // smallest descriptor limit the run itself starts with leaves the monitor none.
            var started: ChildProcess.Finished?
            for limit in 12...64 {
                let result = try ChildProcess.run([
                    "/bin/sh", "-c", "ulimit -n \(limit) && exec '\(Self.memwarn)' run --memory-max 64M --report '\(report)' -- /bin/true",
                ])
                if result.status == 0 {
                    started = result
                    break
                }
                // An "Error: " line, after the monitor's own log line when it could not be armed.
                #expect(
                    result.standardError.split(separator: "\n").contains { $0.hasPrefix("Error: ") },
                    "a run that cannot start says why: \(result.standardError)")
            }
            let result = try #require(started)
            #expect(result.standardError.contains("memwarn run: the monitor stopped ("), "\(result.standardError)")
            let json = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: report))) as? [String: Any])
            #expect((json["monitorError"] as? String)?.contains("Too many open files") == true, "\(json)")
        }

        /// The demo under `memwarn run --memory-max 256M` with 96 descriptors,
        /// flooded with 120 idle connections on its control socket. It keeps its monitor, answers
        /// `memwarn trigger` afterwards, and survives its soak with nothing lost.
        @Test func theDemoSurvivesAConnectionFloodUnderASmallDescriptorLimit() async throws {
            let runtime = TriggerCommandTests.Runtime()
            defer { runtime.remove() }
            let demo = ChildProcess.productsDirectory + "/memwarn-demo"
            let environment = runtime.environment
            let run = Task {
                try await ChildProcess.runOffThePool(
                    ["/bin/sh", "-c", "ulimit -n 96 && exec '\(Self.memwarn)' run --memory-max 256M -- '\(demo)' --duration 12"],
                    environment: environment)
            }
            // The demo's endpoint: the one socket in the private runtime directory, once it is up.
            let path = try #require(try Self.controlSocket(in: runtime.directory, within: .seconds(10)), "the demo's control endpoint came up")
            let flood = (0..<120).compactMap { _ in try? RawControlClient(path) }
            #expect(flood.count == 120)
            let answers = flood.map { $0.readToEnd() }  // each is turned away at once or times out at 2 s
            #expect(answers.filter { $0.contains("too many connections") }.count >= 120 - 24, "beyond a quarter of 96, turned away")
            let trigger = try await ChildProcess.runOffThePool([Self.memwarn, "trigger", "--all"], environment: runtime.environment)
            #expect(trigger.status == 0, "the endpoint answers after the flood: \(trigger.standardError)")
            // The run ends with the demo: it survived with nothing lost.
            let finished = try await run.value
            let lines = finished.standardOutput.split(separator: "\n")
            #expect(finished.status == 0, "the demo's exit status: \(finished.standardError.suffix(400))")
            let summary = try #require(lines.last { $0.contains("\"summary\"") })
            #expect(summary.contains("\"lostWrites\":0"), "\(summary)")
        }

        /// The first socket in `runtime`'s `memwarn` folder, once one is there (at most `limit`):
        /// the folder's making and its entries are watched (inotify), not looked for again and again.
        static func controlSocket(in runtime: String, within limit: Duration) throws -> String? {
            let folder = runtime + "/memwarn"
            let watch = try InotifyWatch(modificationsOf: [])
            try watch.watchEntries(of: runtime)
            var watchingFolder = false
            let deadline = ContinuousClock.now + limit
            while true {
                // Watched before it is read: a socket bound in between is an event.
                if !watchingFolder { watchingFolder = (try? watch.watchEntries(of: folder)) != nil }
                let names = (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []
                if let name = names.first(where: { $0.hasSuffix(".sock") }) { return folder + "/" + name }
                guard ContinuousClock.now < deadline else { return nil }
                _ = try ReadinessPoll.readable([watch.descriptor.rawValue], timeout: deadline - .now)
                _ = try watch.drain()
            }
        }

        /// Errors that were unclear now say in words what is wrong.
        @Test func errorsSayWhatIsWrongInWords() throws {
            let own = try RunCommandTests.ownCgroupDirectory()
            let cgroupPath = String(own.dropFirst(own.hasPrefix("/sys/fs/cgroup/memory") ? "/sys/fs/cgroup/memory".count : 0))
            let file = try ChildProcess.run([Self.memwarn, "status", "--cgroup", cgroupPath + "/memory.limit_in_bytes"])
            #expect(file.status != 0)
            #expect(file.standardError.contains("not a cgroup: a cgroup is a directory, and this is a file"), "\(file.standardError)")

            let long = "/" + String(repeating: "a", count: 5_000)
            let echoed = try ChildProcess.run([Self.memwarn, "status", "--cgroup", long])
            #expect(echoed.status != 0)
            #expect(echoed.standardError.count < 600 && echoed.standardError.contains(" characters)…"), "\(echoed.standardError.count) characters")

            let unprivileged = try ChildProcess.run(
                ChildProcess.asNobody + [
                    Self.memwarn, "run", "--memory-max", "64M", "--", "/bin/true",
                ])
            #expect(unprivileged.status == 125)
            #expect(
                unprivileged.standardError.contains("permission denied. Creating cgroups needs root, or a cgroup delegated to your user"),
                "\(unprivileged.standardError)")

            let starved = try ChildProcess.run(["/bin/sh", "-c", "ulimit -n 10 && exec '\(Self.memwarn)' run --memory-max 64M -- /bin/true"])
            #expect(starved.status != 0)
            #expect(starved.standardError.hasPrefix("Error: ") && starved.standardError.contains("Too many open files"), "\(starved.standardError)")
        }

        /// Found in CI: `memwarn run` under `ulimit -n 10` trapped (SIGILL, no words)
        /// when its parent left descriptors open, since libdispatch traps when it cannot make its
        /// epoll or timer descriptors. Started with 0 to 6 descriptors inherited and every small
        /// limit, it either runs or says why in one line "Error: ...", and is never killed by a
        /// signal; the demo too.
        @Test func withDescriptorsInheritedAndASmallLimitItSaysWhyAndNeverTraps() throws {
            for inherited in [0, 3, 6] {
                let open = (0..<inherited).map { " \($0 + 3)</dev/null" }.joined()
                // From one descriptor free above the streams and the inherited ones (the dynamic
                // loader needs one for libcgroup; none and it fails before memwarn runs).
                let inUse = 3 + inherited
                for limit in (inUse + 1)...(inUse + 24) {
                    let result = try ChildProcess.run(
                        [
                            "/bin/sh", "-c",
                            """
                            exec\(open); ulimit -n \(limit) && exec '\(Self.memwarn)' run --memory-max 64M -- /bin/true
                            """,
                        ], timeout: .seconds(60))
                    #expect(result.status < 128, "\(inherited) inherited, ulimit -n \(limit): \(result.standardError)")
                    if result.status != 0 {
                        // The monitor may log that it could not be armed first (a log line of its
                        // own, by design); the run's failure is then its "Error: " line.
                        let errorLine = result.standardError.split(separator: "\n").first { $0.hasPrefix("Error: ") }
                        #expect(
                            errorLine?.contains("Too many open files") == true,
                            "\(inherited) inherited, ulimit -n \(limit): \(result.standardError)")
                    }
                    if limit < inUse + DispatchDescriptors.descriptorsNeeded {
                        #expect(
                            result.status == 125 && result.standardError.contains("too few file descriptors to start"),
                            "\(inherited) inherited, ulimit -n \(limit): \(result.status): \(result.standardError)")
                    }
                }
            }
            let demo = try ChildProcess.run([
                "/bin/sh", "-c", "exec 3</dev/null; ulimit -n 10 && exec '\(ChildProcess.productsDirectory)/memwarn-demo' --duration 1",
            ])
            #expect(
                demo.status == 1 && demo.standardError.hasPrefix("memwarn-demo: too few file descriptors to start"), "\(demo.status): \(demo.standardError)")
        }

        /// Out of descriptors opening the cgroup's `cgroup.procs`, memwarn
        /// exited 127 ("the command could not start"), as if the command had failed. It is
        /// memwarn's own failure: 125, saying so. The limits where the open is what fails are
        /// found by trying them (the monitor's descriptors come before it).
        @Test func runningOutOfDescriptorsBeforeTheCommandStartsIsMemwarnsFailure() throws {
            var seen = 0
            for limit in 16...40 {
                let result = try ChildProcess.run([
                    "/bin/sh", "-c", "ulimit -n \(limit) && exec '\(Self.memwarn)' run --memory-max 64M -- /bin/true",
                ])
                guard result.standardError.contains("cgroup.procs") else { continue }
                seen += 1
                #expect(result.status == 125, "ulimit -n \(limit): \(result.status): \(result.standardError)")
                #expect(
                    result.standardError.hasPrefix("Error: memwarn ran out of file descriptors") && result.standardError.contains("Too many open files"),
                    "ulimit -n \(limit): \(result.standardError)")
            }
            #expect(seen > 0, "some limit leaves none for cgroup.procs")
        }

        @Test(arguments: ["1", "64ib", "64bb", "100K"])
        func aLimitBelowOneMebibyteOrNotASizeIsRefusedBeforeAnythingStarts(size: String) throws {
            let result = try ChildProcess.run([Self.memwarn, "run", "--memory-max", size, "--", "/bin/true"])
            #expect(result.status == 64)
            #expect(result.standardError.hasPrefix("Error: --memory-max: "), "\(result.standardError)")
        }

        @Test func aReportPathThatCannotBeWrittenIsRefusedBeforeTheCommandRuns() throws {
            let marker = RunCommandTests.temporaryFile("must-not-exist")
            let result = try ChildProcess.run([
                Self.memwarn, "run", "--memory-max", "32M", "--report", "/nonexistent/dir/r.json", "--", "/usr/bin/touch", marker,
            ])
            #expect(result.status == 125)
            #expect(
                result.standardError.hasPrefix("Error: cannot write the report to /nonexistent/dir/r.json: No such file or directory"),
                "\(result.standardError)")
            #expect(!FileManager.default.fileExists(atPath: marker), "the command never ran")
        }
    }
}

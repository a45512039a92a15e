import CgroupKit
import Foundation
import MemwarnSystem
import MemwarnTestKit
import MemwarnTestTraits
import Testing

#if canImport(Glibc)
import Glibc
#endif

extension RunCommandTests {
    /// What the services and sockets under a parent can cost `memwarn agent`, and what its asks
    /// can cost them: memory, descriptors, renewals, asks a second, and its own lines. Each one
    /// failed at the agent that read a status whole, searched and renewed on one blocking thread,
    /// and asked again 20 ms after a round that freed nothing. Real sockets, real cgroups, the
    /// real binary.
    @Suite(.serialized, .tags(.root, .cgroupV1), .needsRealCgroups)
    struct AgentBoundsTests {
        static let memwarn = ChildProcess.productsDirectory + "/memwarn"
        static let probe = ChildProcess.productsDirectory + "/memwarn-growth-probe"
        static let mebibyte: UInt64 = 1 << 20
        typealias Records = AgentUnderAttackTests

        /// Eight services answering 15 MiB without a newline and one answering a status of 280,000
        /// consumers (about 25 MB on a line): the agent, in a cgroup of the 64 MiB its unit and
        /// DaemonSet give it, reads at most 64 KiB of each, lives, and its peak stays well under
        /// the limit. (It read each reply whole, up to 16 MiB, and kept a search's batch: about
        /// 160 MiB, OOM-killed at its first search.)
        @Test func theAgentLivesInItsShippedLimitWhateverItsServicesAnswer() async throws {
            let directory = try AgentCommandTests.privateDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            try await withTestCgroup(limit: 64 * Self.mebibyte) { home in
                try await withTestCgroup(limit: 1_024 * Self.mebibyte) { parent in
                    var children: [TestCgroup] = []
                    var hogs: [MemoryHog] = []
                    defer {
                        for hog in hogs { hog.terminate() }
                        for child in children { try? child.remove() }
                    }
                    for index in 0..<9 {
                        let child = try parent.child("hostile-\(index)")
                        children.append(child)
                        hogs.append(try MemoryHog(in: child, arguments: ["--endpoint", directory, index == 8 ? "huge" : "endless"]))
                    }
                    let agent = try LineChild([Self.memwarn, "agent", "--cgroup", parent.location.path, "--control-dir", directory, "--json"], in: home)
                    defer { agent.killIfRunning() }
                    // Each hostile status read and refused (9), and the renewals too.
                    var unreachable = 0
                    let records = try await Records.records(of: agent) { record in
                        if Records.event("unreachable")(record) { unreachable += 1 }
                        return unreachable == 9
                    }
                    let reasons = records.filter(Records.event("unreachable")).compactMap { $0["reason"] as? String }
                    #expect(reasons.allSatisfy { $0.contains("longer than 65536 bytes") }, "\(reasons)")
                    // Every hostile socket asked again after its back-off, with its refreshes and
                    // renewals, for 8 s: the peaks below are the most any of it took.
                    try await Task.sleep(for: .seconds(8))
                    let peak = try #require(UInt64(try home.read("memory.max_usage_in_bytes").trimmingCharacters(in: .whitespacesAndNewlines)))
                    let resident = try Self.peakResident(of: agent.pid)
                    #expect(agent.exitIfEnded == nil, "the agent ended: \(agent.standardErrorText)")
                    #expect(peak < 48 * Self.mebibyte, "the agent's cgroup peaked at \(ByteSize.describe(peak)) of its 64 MiB")
                    #expect(resident < 48 * Self.mebibyte, "the agent's resident peak (VmHWM) is \(ByteSize.describe(resident))")
                    agent.signal(SIGTERM)
                    #expect(try await agent.exitStatus(within: .seconds(10)) == 0)
                }
            }
        }

        /// 1,100 sockets that never answer, all of one process under the parent, in a directory
        /// searched first, beside one real service in another: under the 1,024 descriptors a
        /// systemd unit gets, the service is found at once and the agent holds few descriptors
        /// (it connected to every socket, each holding a descriptor, and the real service met
        /// `EMFILE`: not found in 12 s).
        @Test func aThousandSocketsThatNeverAnswerKeepNoServiceOut() async throws {
            let junkDirectory = try AgentCommandTests.privateDirectory()
            let serviceDirectory = try AgentCommandTests.privateDirectory()
            defer {
                try? FileManager.default.removeItem(atPath: junkDirectory)
                try? FileManager.default.removeItem(atPath: serviceDirectory)
            }
            try await withTestCgroup(limit: 256 * Self.mebibyte) { parent in
                let junkCgroup = try parent.child("junk")
                defer { try? junkCgroup.remove() }
                let junk = try MemoryHog(in: junkCgroup, arguments: ["--endpoint", junkDirectory, "mute", "1100"])
                defer { junk.terminate() }
                // The hog answers its first command once every socket listens.
                #expect((try FileSystem.entries(of: junkDirectory)).count == 1_101)
                let serviceCgroup = try parent.child("service")
                defer { try? serviceCgroup.remove() }
                let service = try LineChild([Self.probe, "--rate", "10", "--total", "10", "--hold", "60", "--control", serviceDirectory], in: serviceCgroup)
                defer { service.killIfRunning() }
                while !(try await service.nextLine(within: .seconds(30))).contains(#""event":"control""#) {}
                let agent = try LineChild([
                    "/bin/sh", "-c", #"ulimit -n 1024 && exec "$@""#, "sh", Self.memwarn, "agent", "--cgroup", parent.location.path,
                    "--control-dir", junkDirectory, "--control-dir", serviceDirectory, "--json",
                ])
                defer { agent.killIfRunning() }
                let began = ContinuousClock.now
                var descriptors = 0
                _ = try await Records.records(of: agent, within: .seconds(10)) { record in
                    descriptors = max(descriptors, Self.openDescriptors(of: agent.pid))
                    return Records.event("found")(record) && record["pid"] as? Int == Int(service.pid)
                }
                let waited = ContinuousClock.now - began
                #expect(waited < .seconds(2), "the real service was found \(waited) after the agent started")
                for _ in 0..<20 {
                    descriptors = max(descriptors, Self.openDescriptors(of: agent.pid))
                    try await Task.sleep(for: .milliseconds(100))
                }
                #expect(descriptors < 128, "the agent held \(descriptors) descriptors")
                let resident = try Self.peakResident(of: agent.pid)
                #expect(resident < 48 * Self.mebibyte, "the agent's resident peak (VmHWM) is \(ByteSize.describe(resident)) of the 64 MiB its unit gives it")
                #expect(!agent.standardOutputText.contains("Too many open files"), "\(agent.standardOutputText.suffix(2_000))")
            }
        }

        /// The parent above its warning mark because of memory no memwarn service holds (a sibling
        /// without memwarn), and a service whose cache traffic refills at 10 MiB/s: the service is
        /// asked once at most (not at all when its own monitor, which watches the shared parent
        /// too, has emptied its cache before its first status), the agent says nobody can relieve
        /// the parent, and asks no more while that holds (it asked about 45 times a second, 272
        /// releases in 6 s that freed nothing, and the cache held 15 times less than the service
        /// kept on its own).
        @Test func aParentHeldAboveItsMarkByOthersIsAskedOnceNotFortyTimesASecond() async throws {
            let directory = try AgentCommandTests.privateDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let limit = 256 * Self.mebibyte
            try await withTestCgroup(limit: limit) { parent in
                let siblingCgroup = try parent.child("sibling")
                let serviceCgroup = try parent.child("service")
                defer {
                    try? siblingCgroup.remove()
                    try? serviceCgroup.remove()
                }
                let sibling = try MemoryHog(in: siblingCgroup)
                defer { sibling.terminate() }
                // A cache refilled at 10 MiB/s, 20 MiB at most: the parent stays under its critical mark.
                let service = try LineChild(
                    [Self.probe, "--rate", "10", "--total", "20", "--hold", "60", "--start-after", "1", "--control", directory], in: serviceCgroup)
                defer { service.killIfRunning() }
                while !(try await service.nextLine(within: .seconds(30))).contains(#""event":"control""#) {}
                // The sibling takes the parent to 81.5 % of its limit, past the warning mark (80 %).
                let others = try parent.usage()
                _ = try await sibling.hold(Int(Double(limit) * 0.815) - Int(others), within: .seconds(30))
                let agent = try LineChild([Self.memwarn, "agent", "--cgroup", parent.location.path, "--control-dir", directory, "--json"])
                defer { agent.killIfRunning() }
                _ = try await Records.records(of: agent, until: Records.event("unrelievable"))
                try await Task.sleep(for: .seconds(6))  // the cache refills meanwhile
                agent.signal(SIGTERM)
                _ = try await agent.exitStatus(within: .seconds(10))
                let records = agent.standardOutputText.split(separator: "\n").compactMap {
                    try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
                }
                let asks = records.filter(Records.event("ask"))
                #expect(asks.count <= 1, "\(asks.count) asks in about 7 s: \(asks)")
                let saidAt = try #require(records.firstIndex(where: Records.event("unrelievable")))
                let said = records[saidAt]
                #expect(
                    records[..<saidAt].contains { Records.event("found")($0) && $0["pid"] as? Int == Int(service.pid) },
                    "the agent said nobody could relieve the parent before it found the service: \(records)")
                #expect((said["heldElsewhereBytes"] as? Int ?? 0) > Int(limit / 2), "\(said)")
                let peakUsage = Int(try parent.usage())
                #expect(peakUsage < Int(Double(limit) * 0.9), "the parent reached its critical mark: \(ByteSize.describe(UInt64(peakUsage)))")
            }
        }

        /// A socket that never answers beside a service leased for 2 s: every renewal goes out on
        /// the service's own schedule, whatever the mute socket costs, and the lease never lapses
        /// (a mute socket's search held the one thread for up to 2 s before the renewal, and the
        /// service counted the parent again three times).
        @Test func aMuteSocketHoldsUpNoRenewalOfATwoSecondLease() async throws {
            try await AgentUnderAttackTests.withService(under: 256, ["--rate", "10", "--total", "10", "--hold", "60", "--log-level", "notice"]) {
                parent, service, directory in
                while !(try await service.nextLine(within: .seconds(30))).contains(#""event":"control""#) {}
                let muteCgroup = try parent.child("mute")
                defer { try? muteCgroup.remove() }
                let mute = try MemoryHog(in: muteCgroup, arguments: ["--endpoint", directory, "mute"])
                defer { mute.terminate() }
                let agent = try LineChild([
                    Self.memwarn, "agent", "--cgroup", parent.location.path, "--control-dir", directory, "--lease", "2s", "--json",
                ])
                defer { agent.killIfRunning() }
                _ = try await Records.records(of: agent, until: { Records.event("found")($0) && $0["pid"] as? Int == Int(service.pid) })
                // Eight seconds: four leases' worth, and the mute socket's status timed out four times.
                // The agent's own renewal schedule is the subject: real time passes.
                try await Task.sleep(for: .seconds(8))
                agent.signal(SIGTERM)
                _ = try await agent.exitStatus(within: .seconds(10))
                service.signal(SIGTERM)
                _ = try await service.exitStatus(within: .seconds(10))
                let granted = service.standardErrorText.components(separatedBy: "a node agent coordinates an ancestor's limit").count - 1
                #expect(granted == 1, "the lease was granted anew \(granted) times: it lapsed between renewals")
                #expect(!service.standardErrorText.contains("counts again"), "\(service.standardErrorText.suffix(1_000))")
            }
        }

        /// As root the agent searches every user's directories and names their cgroups: a name
        /// with an escape sequence and a line feed reaches its text escaped, so nobody can colour
        /// root's terminal or forge a line of the agent's.
        @Test func theAgentsTextEscapesNamesFromElsewhere() async throws {
            let base = try AgentCommandTests.privateDirectory()
            defer { try? FileManager.default.removeItem(atPath: base) }
            // A directory's name may hold a line feed; a cgroup's may not (EINVAL), but an escape.
            let forged = "\u{1b}[31mred\nrelieved: forged"
            try #require(mkdir(base + "/" + forged, 0o777) == 0 && chmod(base + "/" + forged, 0o777) == 0)
            try await withTestCgroup(limit: 128 * Self.mebibyte) { parent in
                let named = try parent.child("\u{1b}[31mred")
                defer { try? named.remove() }
                let agent = try LineChild([Self.memwarn, "agent", "--cgroup", parent.location.path, "--control-dir", base + "/*"])
                defer { agent.killIfRunning() }
                var lines: [String] = []
                while !(lines.contains { $0.hasPrefix("not linked:") } && lines.contains { $0.hasPrefix("not searched:") }) {
                    lines.append(try await agent.nextLine(within: .seconds(10)))
                }
                agent.signal(SIGTERM)
                _ = try await agent.exitStatus(within: .seconds(10))
                let text = agent.standardOutputText
                #expect(!text.contains("\u{1b}"), "an escape sequence reached the terminal: \(text.debugDescription)")
                #expect(!text.split(separator: "\n").contains { $0.hasPrefix("relieved: forged") }, "a line was forged: \(text)")
                #expect(text.contains(#"\x1b[31mred\x0arelieved: forged"#) && text.contains(#"/\x1b[31mred holds"#), "\(text)")
            }
        }

        static func openDescriptors(of pid: Int32) -> Int {
            (try? FileSystem.entries(of: "/proc/\(pid)/fd").count) ?? 0
        }

        /// `VmHWM` of `/proc/PID/status`: the process's resident peak.
        static func peakResident(of pid: Int32) throws -> UInt64 {
            let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
            let line = try #require(status.split(separator: "\n").first { $0.hasPrefix("VmHWM:") })
            let kibibytes = try #require(UInt64(line.split(separator: " ").dropFirst().first ?? ""))
            return kibibytes * 1_024
        }
    }
}

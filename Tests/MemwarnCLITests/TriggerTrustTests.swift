import CgroupKit
import Foundation
import MemwarnSystem
import MemwarnTestKit
import MemwarnTestTraits
import Testing

/// What `memwarn trigger` believes, attacked: stale sockets, a runtime directory or an endpoint of
/// another user's, and replies with control characters, absurd sizes or one byte at a time. Each
/// test runs in a private runtime directory so that no test touches another process's endpoint.
@Suite(.serialized, .tags(.root, .cgroupV1), .needsRealCgroups)
struct TriggerTrustTests {
    typealias Runtime = TriggerCommandTests.Runtime
    static let nobody: uid_t = 65_534

    /// A socket file with nothing listening on it, as a process that died (or exec'd) leaves.
    static func deadSocket(at path: String) throws {
        try FileDescriptor.unixStreamSocket(nonBlocking: false).bind(to: UnixSocketAddress(path: path))
    }

    @Test func aStaleSocketOfALivePidIsPrunedNotFailedOnForever() throws {
        let runtime = Runtime()
        defer { runtime.remove() }
        try FileManager.default.createDirectory(
            atPath: runtime.directory + "/memwarn", withIntermediateDirectories: false,
            attributes: [.posixPermissions: 0o700])
        let stale = runtime.socket(of: 1)  // pid 1 always exists: pruning by pid alone kept it forever
        try Self.deadSocket(at: stale)
        let result = try runtime.trigger(["--all"])
        #expect(!FileManager.default.fileExists(atPath: stale), "nothing listened on it: pruned")
        #expect(result.standardError.contains("no control endpoints"), "\(result.standardError)")
    }

    @Test func aProbeThatExitsWithoutStoppingItsMonitorLeavesNoSocket() throws {
        let runtime = Runtime()
        defer { runtime.remove() }
        let probe = try JSONLineChild([TriggerCommandTests.probe], environment: runtime.environment)
        #expect(try probe.send("watch")["watching"] as? String == "normal")
        let socket = runtime.socket(of: probe.pid)
        #expect(FileManager.default.fileExists(atPath: socket))
        #expect(probe.stop() == 0)  // stdin closed: the probe calls exit(0)
        #expect(!FileManager.default.fileExists(atPath: socket), "removed at exit")
    }

    @Test func aRuntimeDirectoryAnotherUserOwnsAndAnyoneMayChangeIsNotTrusted() throws {
        let runtime = Runtime()
        defer { runtime.remove() }
        // As nobody would: the runtime directory and its memwarn folder are theirs.
        try FileManager.default.createDirectory(
            atPath: runtime.directory + "/memwarn", withIntermediateDirectories: false,
            attributes: [.posixPermissions: 0o700])
        for folder in [runtime.directory, runtime.directory + "/memwarn"] { #expect(chown(folder, Self.nobody, Self.nobody) == 0) }
        #expect(chmod(runtime.directory, 0o777) == 0)
        let result = try runtime.trigger(["--all"])
        #expect(result.status != 0)
        #expect(result.standardError.contains("lies in \(runtime.directory), owned by uid 65534"), "\(result.standardError)")
        // An endpoint refuses it too: the probe's monitor runs without one, and says why.
        let probe = try JSONLineChild([TriggerCommandTests.probe], environment: runtime.environment)
        defer { probe.stop() }
        #expect(try probe.send("watch")["watching"] as? String == "normal")
        #expect(!FileManager.default.fileExists(atPath: runtime.socket(of: probe.pid)))
    }

    /// A fake endpoint on `path` (python3, as nobody when asked): it reads a request and
    /// answers with `reply` written `chunk` bytes at a time, `pause` seconds apart.
    final class FakeEndpoint {
        private let process: LineChild
        var pid: Int32 { process.pid }

        init(at path: String, asNobody: Bool, reply: String, chunk: Int = 1 << 20, pause: Double = 0) throws {
            let server = """
                import socket, sys, time
                s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(4); print("ready", flush=True)
                data, chunk, pause = (sys.argv[2] + "\\n").encode(), int(sys.argv[3]), float(sys.argv[4])
                while True:
                    c, _ = s.accept(); c.recv(65536)
                    try:
                        for i in range(0, len(data), chunk):
                            c.sendall(data[i:i + chunk]); time.sleep(pause)
                    except OSError:
                        pass
                    c.close()
                """
            let python = ["/usr/bin/python3", "-c", server, path, reply, "\(chunk)", "\(pause)"]
            process = try LineChild(asNobody ? ChildProcess.asNobody + python : python)
            #expect(try process.nextLine(timeout: .seconds(20)) == "ready")
        }

        deinit {
            process.killIfRunning()  // the server we started
            _ = try? process.waitForExit()
        }
    }

    /// A `warn` reply whose consumer's name carries a terminal escape (clear the screen).
    static let hostileReply =
        #"{"ok":true,"request":"warn","pid":1,"report":{"level":"warning","targetBytes":0,"freedBytes":10737418240,"entries":[{"consumer":"\u001b[2Jowned","tier":"caches","bytesBefore":1,"bytesAfter":0,"bytesFreed":10737418240,"durationMicroseconds":1}],"trimmedHeap":false,"durationMicroseconds":1,"metTarget":true,"headroomBytes":0,"growthBytesPerSecond":0}}"#

    static func endpointDirectory(_ runtime: Runtime) throws {
        try FileManager.default.createDirectory(
            atPath: runtime.directory + "/memwarn", withIntermediateDirectories: false,
            attributes: [.posixPermissions: 0o700])
    }

    @Test func anEndpointRunByAnotherUserIsNotBelieved() throws {
        let runtime = Runtime()
        defer { runtime.remove() }
        // Nobody's fake endpoint, in a folder of nobody's, hard-linked into our runtime directory
        // under a live pid's name: it answers "freed 10 GiB" with terminal escapes.
        let theirs = runtime.directory + "/theirs"
        #expect(chmod(runtime.directory, 0o711) == 0)  // nobody may pass through to their folder
        try FileManager.default.createDirectory(atPath: theirs, withIntermediateDirectories: false)
        #expect(chown(theirs, Self.nobody, Self.nobody) == 0)
        let fake = try FakeEndpoint(at: theirs + "/fake.sock", asNobody: true, reply: Self.hostileReply)
        try Self.endpointDirectory(runtime)
        #expect(link(theirs + "/fake.sock", runtime.socket(of: 1)) == 0, "link: \(String(cString: strerror(errno)))")
        let result = try runtime.trigger(["--pid", "1"])
        withExtendedLifetime(fake) {}
        #expect(result.status != 0)
        #expect(result.standardError.contains("runs as uid 65534, neither this user"), "\(result.standardError)")
        #expect(!result.standardOutput.contains("freed"), "nothing it said was printed")
    }

    @Test func whatAnEndpointSendsIsPrintedWithoutControlCharacters() throws {
        let runtime = Runtime()
        defer { runtime.remove() }
        try Self.endpointDirectory(runtime)
        let fake = try FakeEndpoint(at: runtime.socket(of: 1), asNobody: false, reply: Self.hostileReply)
        let result = try runtime.trigger(["--pid", "1"])
        withExtendedLifetime(fake) {}
        #expect(result.status == 0, "\(result.standardError)")
        #expect(result.standardOutput.contains("?[2Jowned"), "\(result.standardOutput)")
        #expect(!result.standardOutput.unicodeScalars.contains { $0.value == 0x1b }, "no escape reached the terminal")
    }

    /// Two entries of 2^63 - 1 bytes freed were summed with a trapping `+`: the
    /// client died with SIGILL. Such a reply is refused, saying why.
    @Test func aReportOfAbsurdSizesIsRefusedNotACrash() throws {
        let runtime = Runtime()
        defer { runtime.remove() }
        try Self.endpointDirectory(runtime)
        let entry =
            #"{"consumer":"liar","tier":"caches","bytesBefore":9223372036854775807,"bytesAfter":0,"bytesFreed":9223372036854775807,"durationMicroseconds":1}"#
        let reply =
            #"{"ok":true,"request":"warn","pid":1,"report":{"level":"warning","targetBytes":0,"entries":[\#(entry),\#(entry)],"trimmedHeap":false,"durationMicroseconds":1}}"#
        let fake = try FakeEndpoint(at: runtime.socket(of: 1), asNobody: false, reply: reply)
        for json in [false, true] {
            let result = try runtime.trigger(["--pid", "1"] + (json ? ["--json"] : []))
            #expect(result.status == 1, "refused, not a trap: \(result.status): \(result.standardError)")
            #expect(
                result.standardError.hasPrefix("Error: process 1") && result.standardError.contains(#""bytesBefore" is 9223372036854775807"#)
                    && result.standardError.contains("more than any memory"), "\(result.standardError)")
            #expect(result.standardOutput.isEmpty)
        }
        withExtendedLifetime(fake) {}
    }

    @Test func aReplyDribbledOneByteAtATimeIsCutOffAtTheOverallDeadline() async throws {
        let runtime = Runtime()
        defer { runtime.remove() }
        try Self.endpointDirectory(runtime)
        // One byte every 0.5 s: each read is well within the per-read limit, the whole never ends in time.
        let fake = try FakeEndpoint(at: runtime.socket(of: 1), asNobody: false, reply: Self.hostileReply, chunk: 1, pause: 0.5)
        let result = try await ChildProcess.runOffThePool([TriggerCommandTests.memwarn, "trigger", "--pid", "1"], environment: runtime.environment)
        withExtendedLifetime(fake) {}
        #expect(result.status != 0)
        #expect(result.standardError.contains("no complete reply from \(runtime.socket(of: 1)) within 10"), "\(result.standardError)")
    }
}

/// An account without `/run/user/<uid>` (a service account) serves in
/// `/tmp/memwarn-<uid>`, which any other user can make first: the endpoint then never started.
/// And a command that switched to such an account under a root `memwarn run` and was killed left
/// its socket there, though the README says `run` removes it. Run as uid 65532, an account
/// nothing else here uses, so that no other test's directory is touched.
@Suite(.serialized, .tags(.root, .cgroupV1), .needsRealCgroups)
struct ServiceAccountDirectoryTests {
    static let account: uid_t = 65_532
    static let squatter: uid_t = 65_531
    static let asAccount = ["/usr/bin/setpriv", "--reuid=\(account)", "--regid=\(account)", "--clear-groups"]
    static let probe = ChildProcess.productsDirectory + "/memwarn-growth-probe"
    static let memwarn = ChildProcess.productsDirectory + "/memwarn"
    static let primary = "/tmp/memwarn-\(account)"

    /// No runtime directory, no override: the account's default is `/tmp/memwarn-<uid>`.
    static var environment: [String] {
        ProcessInfo.processInfo.environment.filter { !["XDG_RUNTIME_DIR", "MEMWARN_CONTROL", "TMPDIR"].contains($0.key) }
            .map { "\($0.key)=\($0.value)" } + ["TMPDIR=/tmp"]
    }

    /// Removes the account's control directories (the squatted one and its own).
    static func removeDirectories() {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: "/tmp")) ?? []
        for name in names where name == "memwarn-\(account)" || name.hasPrefix("memwarn-\(account).") {
            try? FileManager.default.removeItem(atPath: "/tmp/" + name)
        }
    }

    /// The growth probe as the account, serving in the default directory: its socket's path.
    static func startProbe(_ prefix: [String] = [], in cgroup: TestCgroup) throws -> (JSONLineChild, String) {
        let probe = try JSONLineChild(
            prefix + asAccount + [Self.probe, "--control", "default", "--rate", "1", "--total", "1", "--hold", "60"],
            in: cgroup, environment: environment)
        var line = try probe.receive(timeout: .seconds(30))
        while line["event"] as? String != "control" { line = try probe.receive(timeout: .seconds(30)) }
        return (probe, try #require(line["socket"] as? String))
    }

    @Test func aDirectoryAnotherUserMadeFirstDoesNotStopTheEndpoint() async throws {
        Self.removeDirectories()
        defer { Self.removeDirectories() }
        #expect(mkdir(Self.primary, 0o700) == 0 && chown(Self.primary, Self.squatter, Self.squatter) == 0, "made first by another user")
        try await withTestCgroup(limit: 512 << 20) { cgroup in
            let (probe, socket) = try Self.startProbe(in: cgroup)
            defer {
                probe.child.signal(SIGTERM)
                _ = probe.stop()
            }
            #expect(socket.hasPrefix(Self.primary + "."), "served in the account's own directory: \(socket)")
            let trigger = try ChildProcess.run(Self.asAccount + [Self.memwarn, "trigger", "--all", "--json"], environment: Self.environment)
            #expect(trigger.status == 0, "\(trigger.standardError)")
            #expect(trigger.standardOutput.contains("\"pid\":\(probe.pid)"), "\(trigger.standardOutput)")
            var status = stat()
            #expect(lstat(Self.primary, &status) == 0 && status.st_uid == Self.squatter, "the other user's directory is left as it is")
        }
    }

    @Test func aRootRunRemovesTheSocketOfACommandThatBecameTheAccountAndWasKilled() async throws {
        Self.removeDirectories()
        defer { Self.removeDirectories() }
        try await withTestCgroup(limit: 512 << 20) { cgroup in
            let run = [Self.memwarn, "run", "--memory-max", "256M", "--"]
            let (probe, socket) = try Self.startProbe(run, in: cgroup)
            #expect(socket.hasPrefix(Self.primary + "/"), "\(socket)")
            let pid = try #require(Int32(socket.dropFirst(Self.primary.count + 1).dropLast(".sock".count)), "\(socket)")
            #expect(kill(pid, SIGKILL) == 0)  // the command, as an OOM kill would end it: no time to remove its socket
            #expect(probe.stop() == 137)
            #expect(!FileManager.default.fileExists(atPath: socket), "memwarn run removed the socket the killed command left")
        }
    }
}

import CgroupKit
import Foundation
import Logging
import MemwarnSystem
import MemwarnTestFixtures
import MemwarnTestKit
import MemwarnTestTraits
import Testing

@testable import MemwarnControl
@testable import MemwarnMonitor
@testable import MemwarnRelease
@testable import MemwarnStores

/// The control endpoint on a real Unix socket, served while a real monitor runs: the
/// protocol, its errors, the socket's and directory's modes, slow, hostile and foreign
/// clients, and the monitor working on throughout.
@Suite(.serialized, .tags(.root, .cgroupV1), .needsRealCgroups)
struct ControlEndpointTests {
    typealias FakeConsumer = CacheFixtures.FakeConsumer
    static let mebibyte = 1 << 20

    // MARK: Protocol

    @Test func statusReportsThePidLevelUsageAndTheConsumersInReleaseOrder() async throws {
        let coordinator = ReleaseCoordinator(trimsHeap: false)
        let caches = Self.caches(["small": 1, "large": 3], registeredWith: coordinator)
        let posters = FakeConsumer("posters", tier: .media, footprint: 5 * Self.mebibyte)
        coordinator.register(posters)
        try await Self.withServingMonitor(coordinator: coordinator) { monitor, socket, _ in
            let reply = try Self.object(ControlClient.exchange(#"{"request":"status"}"#, with: socket))
            let latest = try #require(monitor.latestEvent)
            #expect(reply["ok"] as? Bool == true)
            #expect(reply["request"] as? String == "status")
            #expect(reply["pid"] as? Int == Int(getpid()))
            #expect(reply["level"] as? String == latest.level.rawValue)
            #expect(reply["usageBytes"] as? Int ?? 0 > 0)
            #expect(reply.keys.contains("limitBytes"), "every key is present; no limit reads null")
            let consumers = try #require(reply["consumers"] as? [[String: Any]])
            #expect(consumers.map { $0["name"] as? String } == ["large", "small", "posters"])
            #expect(consumers.map { $0["tier"] as? String } == ["caches", "caches", "media"])
            #expect(consumers.map { $0["footprintBytes"] as? Int } == [3, 1, 5].map { $0 * Self.mebibyte })
            guard case .status(let status) = try ControlClient.send(.status, to: socket) else {
                Issue.record("a status request got another reply")
                return
            }
            #expect(status.pid == getpid() && status.consumers.count == 3)
        }
        withExtendedLifetime(caches) {}
    }

    @Test func statusCarriesTheReleasesSoFarTheExhaustionForecastsAndTheProcessMemory() async throws {
        let coordinator = ReleaseCoordinator(trimsHeap: false)
        let caches = Self.caches(["small": 1, "large": 3], registeredWith: coordinator)
        try await Self.withServingMonitor(coordinator: coordinator) { monitor, socket, _ in
            guard case .status(let before) = try ControlClient.send(.status, to: socket) else {
                Issue.record("a status request got another reply")
                return
            }
            #expect(before.released.releases == 0 && before.released.freedBytesByTier.isEmpty)
            _ = try ControlClient.send(.warn(level: .warning, targetBytes: 2 * Self.mebibyte), to: socket)
            guard case .status(let after) = try ControlClient.send(.status, to: socket) else {
                Issue.record("a status request got another reply")
                return
            }
            #expect(after.released.releases == 1, "the warn's release is counted")
            #expect(after.released.freedBytesByTier == ["caches": 2 * Self.mebibyte], "the largest cache met the 2 MiB target: \(after.released)")
            #expect(after.released.freedBytesByConsumer == ["large": 2 * Self.mebibyte])
            #expect(after.isMemoryExhausted == monitor.isMemoryExhausted && after.forecasts == monitor.forecastTally)
            let process = try #require(after.process, "this process's memory is read")
            #expect(process.residentBytes > 1 << 20)
            #expect(
                ProcessMemory.glibcMallocIsTheAllocator ? (process.heapInUseBytes ?? 0) > 0 : process.heapInUseBytes == nil,
                "glibc's heap figure, or none under another allocator (the thread sanitizer's)")
        }
        withExtendedLifetime(caches) {}
    }

    @Test func warnReleasesThroughTheCoordinatorInTheDocumentedTierOrder() async throws {
        let coordinator = ReleaseCoordinator(trimsHeap: false)
        let caches = Self.caches(["small": 1, "large": 3], registeredWith: coordinator)
        let posters = FakeConsumer("posters", tier: .media, footprint: 2 * Self.mebibyte)
        let connections = FakeConsumer("connections", tier: .sharedResources, footprint: Self.mebibyte)
        for consumer in [posters, connections] { coordinator.register(consumer) }
        try await Self.withServingMonitor(coordinator: coordinator) { _, socket, _ in
            let reply = try Self.object(ControlClient.exchange(#"{"request":"warn","level":"warning"}"#, with: socket))
            #expect(reply["ok"] as? Bool == true)
            #expect(reply["request"] as? String == "warn")
            #expect(reply["pid"] as? Int == Int(getpid()))
            let report = try #require(reply["report"] as? [String: Any])
            #expect(report["level"] as? String == "warning")
            #expect(report["targetBytes"] as? Int == .max, "no targetBytes: everything the level allows")
            let entries = try #require(report["entries"] as? [[String: Any]])
            #expect(entries.map { $0["consumer"] as? String } == ["large", "small", "posters"])
            #expect(entries.map { $0["tier"] as? String } == ["caches", "caches", "media"])
            #expect(report["freedBytes"] as? Int == 6 * Self.mebibyte)
            #expect(caches.allSatisfy { $0.totalCost == 0 } && posters.footprintBytes == 0)
            #expect(connections.footprintBytes == Self.mebibyte, "a warning never closes shared resources")

            guard case .released(let request, let pid, let critical) = try ControlClient.send(.warn(level: .critical, targetBytes: 1), to: socket) else {
                Issue.record("a warn request got another reply")
                return
            }
            #expect(request == "warn" && pid == getpid())
            #expect(critical.level == .critical && critical.targetBytes == 1)
            #expect(critical.entries.map(\.consumer) == ["connections"], "critical reaches shared resources; the rest is empty")
        }
    }

    @Test func terminateSuspendedAsksOnlyTheSuspendedUnitsLargestFirst() async throws {
        let coordinator = ReleaseCoordinator(trimsHeap: false)
        let caches = Self.caches(["sessions": 2], registeredWith: coordinator)
        let units = [FakeConsumer("unit-a", tier: .suspendedUnits, footprint: 500), FakeConsumer("unit-b", tier: .suspendedUnits, footprint: 900)]
        for unit in units { coordinator.register(unit) }
        try await Self.withServingMonitor(coordinator: coordinator) { _, socket, _ in
            let reply = try Self.object(ControlClient.exchange(#"{"request":"terminate-suspended"}"#, with: socket))
            #expect(reply["ok"] as? Bool == true)
            #expect(reply["request"] as? String == "terminate-suspended")
            let report = try #require(reply["report"] as? [String: Any])
            #expect(report["level"] as? String == "critical")
            let entries = try #require(report["entries"] as? [[String: Any]])
            #expect(entries.map { $0["consumer"] as? String } == ["unit-b", "unit-a"])
            #expect(entries.allSatisfy { $0["tier"] as? String == "suspended-units" })
            #expect(caches[0].totalCost == 2 * Self.mebibyte, "caches are not asked")
        }
    }

    @Test func badRequestsGetAClearErrorReplyAndReleaseNothing() async throws {
        let coordinator = ReleaseCoordinator(trimsHeap: false)
        let caches = Self.caches(["sessions": 1], registeredWith: coordinator)
        let cases: [(line: String, error: String)] = [
            ("this is not json", "malformed request: expected one JSON object"),
            ("[1,2]", "malformed request: expected one JSON object"),
            (#"{"level":"warning"}"#, #"malformed request: no "request" member"#),
            (#"{"request":"launch"}"#, #"unknown request "launch" (expected status, warn, terminate-suspended or coordinate)"#),
            (#"{"request":"coordinate","leaseMilliseconds":5000}"#, #"coordinate needs "cgroup""#),
            (#"{"request":"coordinate","cgroup":"/a","leaseMilliseconds":61000}"#, #"coordinate needs "leaseMilliseconds" within 0...60000"#),
            (#"{"request":"coordinate","cgroup":"/a","leaseMilliseconds":5000}"#, "not coordinated: /a is not an ancestor of this service's memory cgroup"),
            (#"{"request":"warn","level":"normal"}"#, #"bad level "normal" (expected warning or critical)"#),
            (#"{"request":"warn","targetBytes":"lots"}"#, #"malformed request: "targetBytes" has the wrong type"#),
            (#"{"request":"warn","targetBytes":-1}"#, "bad targetBytes -1"),
        ]
        try await Self.withServingMonitor(coordinator: coordinator) { _, socket, _ in
            for (line, error) in cases {
                let reply = try Self.object(ControlClient.exchange(line, with: socket))
                #expect(reply["ok"] as? Bool == false, "\(line)")
                #expect((reply["error"] as? String)?.hasPrefix(error) == true, "\(line): \(reply)")
                #expect(Set(reply.keys) == ["ok", "error"])
            }
        }
        #expect(caches[0].totalCost == Self.mebibyte)
    }

    @Test func aLineOverTheLimitIsRefusedAndOneAtTheLimitIsServed() async throws {
        try await Self.withServingMonitor { _, socket, _ in
            let oversized = String(repeating: "x", count: 100_000)
            do {
                let reply = try Self.object(ControlClient.exchange(oversized, with: socket))
                #expect(reply["ok"] as? Bool == false)
                #expect((reply["error"] as? String)?.hasPrefix("request too long: more than 65536 bytes") == true, "\(reply)")
            } catch let error as ControlError {
                // The endpoint may close before the client has sent everything: a clean close.
                #expect(error.code == .connectionClosed, "\(error.debugDescription)")
            }
            let status = #"{"request":"status"}"#
            let atLimit = String(status.dropLast()) + String(repeating: " ", count: ControlRequest.maximumLineBytes - status.count) + "}"
            #expect(atLimit.utf8.count == ControlRequest.maximumLineBytes)
            #expect(try Self.object(ControlClient.exchange(atLimit, with: socket))["ok"] as? Bool == true)
        }
    }

    // MARK: The socket and its directory

    @Test func theSocketIsOwnerOnlyInAnOwnerOnlyDirectoryAndGoesAwayWhenTheServiceStops() async throws {
        try await Self.withControlDirectory { directory in
            let monitor = PressureMonitor(configuration: Self.configuration(), logger: testLogger)
            let control = ControlService(monitor: monitor, directory: directory, environment: [:], logger: testLogger)
            let socket = try await Self.serving(control) { served in
                let socket = try #require(served)
                #expect(socket == directory + "/\(getpid()).sock")
                let file = try Self.status(of: socket)
                #expect(file.st_mode & S_IFMT == S_IFSOCK)
                #expect(file.st_mode & 0o7777 == 0o600)
                let folder = try Self.status(of: directory)
                #expect(folder.st_mode & S_IFMT == S_IFDIR)
                #expect(folder.st_mode & 0o7777 == 0o700)
                #expect(folder.st_uid == geteuid() && file.st_uid == geteuid())
                #expect(control.socketPath == socket)
                return socket
            }
            #expect(access(socket, F_OK) != 0, "the socket is removed when run() ends")
            #expect(control.socketPath == nil)
            let error = #expect(throws: ControlError.self) { try ControlClient.exchange(#"{"request":"status"}"#, with: socket) }
            #expect(error?.code == .noEndpoint && error?.errno == ENOENT, "the socket is gone: \(String(describing: error))")
        }
    }

    @Test func aDirectoryThatIsASymbolicLinkAnotherUsersOrWritableByOthersIsRefusedAndTheServiceRunsWithoutTheEndpoint() async throws {
        try await Self.withControlDirectory { directory in
            let parent = String(directory.dropLast("/memwarn".count))
            let real = parent + "/real"
            #expect(mkdir(real, 0o700) == 0 && symlink(real, directory) == 0)
            #expect(Self.endpointError(directory)?.contains("is a symbolic link; refusing to use it") == true)
            let monitor = PressureMonitor(configuration: Self.configuration(), logger: testLogger)
            let control = ControlService(monitor: monitor, directory: directory, environment: [:], logger: testLogger)
            try await Self.serving(control) { socket in
                #expect(socket == nil, "it runs without a socket")
                #expect(control.socketPath == nil)
            }
            #expect(ControlClient.socketPaths(in: real).isEmpty)

            let foreign = parent + "/foreign"
            #expect(mkdir(foreign, 0o700) == 0 && chown(foreign, 65534, 65534) == 0)
            #expect(
                Self.endpointError(foreign)
                    == "the control directory \(foreign) is owned by uid 65534, not by this process's uid \(geteuid()): uid 65534 made it before this process did; refusing to use it. \(Self.whatToDo())"
            )

            let open = parent + "/open"
            #expect(mkdir(open, 0o700) == 0 && chmod(open, 0o777) == 0)
            #expect(Self.endpointError(open) == "the control directory \(open) is writable by other users (mode 777); refusing to use it")
        }
    }

    /// A pod's directory as `Examples/kubernetes` made it before: the node's `/run/memwarn/pods`
    /// 1777, so the kubelet made each pod's directory 1777 too (it gives a `subPathExpr`
    /// directory its volume's mode), and any user of the node could make `<pod uid>/memwarn`
    /// before the pod's service did (pod uids are in the cgroup names anyone may read). The
    /// service names the directory, its owner, the folder and what to do, in one line, and runs
    /// on without the endpoint; one that made its own there serves and is warned it could have
    /// been taken. (The manifests now keep the folder root's: nobody else can make names there.)
    @Test func aDirectoryAnotherUserMadeFirstInAStickyFolderIsNamedWithItsOwnerAndWhatToDo() async throws {
        try await Self.withControlDirectory { directory in
            let pod = String(directory.dropLast("/memwarn".count)) + "/pod"
            #expect(mkdir(pod, 0o755) == 0 && chmod(pod, 0o1777) == 0)
            let taken = pod + "/memwarn"
            #expect(mkdir(taken, 0o700) == 0 && chown(taken, 65534, 65534) == 0, "uid 65534 makes it first")
            let monitor = PressureMonitor(configuration: Self.configuration(), logger: testLogger)
            let refused = LogRecorder()
            let control = ControlService(monitor: monitor, directory: taken, environment: [:], logger: refused.logger)
            try await Self.serving(control) { socket in
                #expect(socket == nil, "it runs on without a socket")
                #expect(control.socketPath == nil)
            }
            let uid = geteuid()
            #expect(
                refused.lines == [
                    "error control endpoint not started; the process runs without it directory=\(taken) reason=the control directory \(taken) is owned by uid 65534, "
                        + "not by this process's uid \(uid): uid 65534 made it before this process did, in \(pod), where other users may make names (mode 1777); "
                        + "refusing to use it. \(Self.whatToDo())"
                ])
            #expect(ControlClient.socketPaths(in: taken).isEmpty)

            #expect(rmdir(taken) == 0, "nobody first")
            let warned = LogRecorder()
            let serving = ControlService(monitor: monitor, directory: taken, environment: [:], logger: warned.logger)
            try await Self.serving(serving) { socket in
                #expect(socket == ControlDirectory.socketPath(for: getpid(), in: taken))
            }
            #expect(
                warned.lines == [
                    "warning control endpoint: its directory could have been taken by another user first reason=the control directory \(taken) lies in \(pod), "
                        + "where other users may make names (mode 1777): another user could have made it before this process, and the endpoint would not have started. "
                        + "Make \(pod) writable by root alone, and the control directory for uid \(uid) before the service starts "
                        + "(on Kubernetes: /run/memwarn/pods root's, mode 0755, and pod.yaml's init container; see Examples/kubernetes/README.md)"
                ])

            #expect(chown(pod, 65534, 65534) == 0, "the pod's directory itself made by uid 65534 (before the kubelet did, in a 1777 /run/memwarn/pods)")
            #expect(
                Self.endpointError(taken)
                    == "the control directory \(taken) lies in \(pod), owned by uid 65534, neither root nor this process's uid \(uid): "
                    + "that user made it, or took it, before this process; refusing to use it. \(Self.whatToDo(removing: pod))")
        }
    }

    @Test func onlyAnAddedServiceServesAndMemwarnControlOffWithholdsIt() async throws {
        for (value, withheld) in [("off", true), ("OFF", true), ("0", true), ("no", true), ("false", true), ("on", false), ("1", false), ("maybe", false)] {
            #expect(ControlService.withholds(environment: ["MEMWARN_CONTROL": value]) == withheld, "\(value)")
        }
        #expect(!ControlService.withholds(environment: [:]))
        // A monitor alone opens no socket: the endpoint is a service the application adds. (A
        // socket a dead process of the same pid left there is not this one's: what counts is
        // that the path does not change while the monitor runs.)
        let alone = PressureMonitor(configuration: Self.configuration(), logger: testLogger)
        let ownPath = ControlDirectory.socketPath(for: getpid(), in: ControlDirectory.defaultPath)
        let before = try? FileStatus.at(ownPath, followingLinks: false)
        try await withRunningMonitor(alone) { iterator in
            _ = try await next(&iterator)
            let during = try? FileStatus.at(ownPath, followingLinks: false)
            #expect(during == before, "the monitor made \(ownPath): \(String(describing: during)), before: \(String(describing: before))")
        }
        try await Self.withControlDirectory { directory in
            let control = ControlService(monitor: alone, directory: directory, environment: ["MEMWARN_CONTROL": "off"], logger: testLogger)
            try await Self.serving(control) { socket in
                #expect(socket == nil)
                #expect(access(directory, F_OK) != 0, "nothing is created")
            }
        }
    }

    @Test func staleSocketsOfExitedProcessesArePrunedAndOurOwnStaleSocketIsReplaced() async throws {
        try await Self.withControlDirectory { directory in
            #expect(mkdir(directory, 0o700) == 0)
            let child = try LineChild(["/bin/true"])
            #expect(try child.waitForExit() == 0)
            let exited = child.pid
            let stale = ControlDirectory.socketPath(for: exited, in: directory)
            let own = ControlDirectory.socketPath(for: getpid(), in: directory)
            try Self.leaveSocketFile(at: stale)
            try Self.leaveSocketFile(at: own)
            #expect(creat(directory + "/1.sock", 0o600) >= 0, "a regular file with a socket's name")
            #expect(ControlClient.socketPaths(in: directory) == [exited, getpid()].sorted().map { ControlDirectory.socketPath(for: $0, in: directory) })
            // Pruned: the socket of a process that exited, and one nothing listens on though its
            // pid lives (a reused pid used to keep a stale socket forever).
            #expect(Set(ControlClient.pruneStaleSockets(in: directory)) == [stale, own])
            #expect(ControlClient.socketPaths(in: directory).isEmpty)
            try Self.leaveSocketFile(at: own)  // our own stale one again: the endpoint replaces it
            let staleError = #expect(throws: ControlError.self) { try ControlClient.exchange(#"{"request":"status"}"#, with: own) }
            #expect(staleError?.code == .noEndpoint, "\(String(describing: staleError))")

            try await Self.withServingMonitor(directory: directory) { _, socket, _ in
                let reply = try ControlClient.send(.status, to: socket)
                #expect(socket == own)
                #expect(reply.isSuccess, "our own stale socket was replaced")
            }
        }
    }

    @Test func servicesOfOneProcessShareOneSocketUntilTheLastStops() async throws {
        try await Self.withControlDirectory { directory in
            let (first, second) = (ReleaseCoordinator(trimsHeap: false), ReleaseCoordinator(trimsHeap: false))
            let caches = Self.caches(["first": 1], registeredWith: first) + Self.caches(["second": 1], registeredWith: second)
            let monitor = PressureMonitor(configuration: Self.configuration(), logger: testLogger)
            let earlier = ControlService(monitor: monitor, coordinator: first, directory: directory, environment: [:], logger: testLogger)
            let running = Task { await earlier.run() }
            let socket = try #require(await earlier.started())
            let later = ControlService(monitor: monitor, coordinator: second, directory: directory, environment: [:], logger: testLogger)
            try await Self.serving(later) { (served) async throws in
                #expect(served == socket)
                #expect(try Self.consumerNames(socket) == ["first"], "the service that started first answers")
                running.cancel()
                await running.value
                #expect(try Self.consumerNames(socket) == ["second"], "the endpoint stays while a service runs")
            }
            #expect(access(socket, F_OK) != 0)
            withExtendedLifetime(caches) {}
        }
    }

    // MARK: Slow, hostile and foreign clients

    @Test func aSilentClientIsClosedAfterTheDeadlineWhileAnotherIsServed() async throws {
        try await Self.withServingMonitor { _, socket, _ in
            let connected = ContinuousClock.now
            let silent = try RawControlClient(socket)
            let served = try ControlClient.send(.status, to: socket)
            #expect(served.isSuccess)
            #expect(ContinuousClock.now - connected < .seconds(1), "served while the silent client waits")
            let answer = silent.readToEnd()
            let waited = ContinuousClock.now - connected
            #expect(answer.hasPrefix(#"{"error":"timeout: no complete request line within 2.0 seconds","ok":false}"#), "\(answer)")
            #expect(waited >= .milliseconds(1_900) && waited < .seconds(6), "closed after \(waited)")
        }
    }

    @Test func beyondTheConnectionLimitNewClientsAreToldAndClosedAtOnce() async throws {
        try await Self.withServingMonitor { _, socket, _ in
            let held = try (0..<ControlEndpoint.connectionLimit).map { _ in try RawControlClient(socket) }
            let started = ContinuousClock.now
            let extra = try (0..<4).map { _ in try RawControlClient(socket) }
            for client in extra {
                #expect(client.readToEnd() == #"{"error":"too many connections (limit 256); try again","ok":false}"# + "\n")
            }
            #expect(ContinuousClock.now - started < .seconds(1), "refused at once, not at the deadline")
            for client in held { client.send(#"{"request":"status"}"# + "\n") }
            let answers = held.map { $0.readToEnd() }
            #expect(answers.allSatisfy { (try? Self.object($0))?["request"] as? String == "status" }, "the connections within the limit are served")
            #expect(try ControlClient.send(.status, to: socket).isSuccess, "served again once those are done")
        }
    }

    @Test func aHundredConcurrentClientsAndAbuseLeaveTheMonitorWorking() async throws {
        try await withTestCgroup(limit: 64 << 20) { cgroup in
            let hog = try MemoryHog()
            try cgroup.add(pid: hog.pid)
            let overhead = Int(try cgroup.usage())
            try await Self.withServingMonitor(cgroupPath: cgroup.location.directory) { monitor, socket, iterator in
                let silent = try (0..<20).map { _ in try RawControlClient(socket) }
                _ = try? ControlClient.exchange(String(repeating: "{", count: 200_000), with: socket)
                let clients = try (0..<100).map { _ in try RawControlClient(socket) }
                for client in clients { client.send(#"{"request":"status"}"# + "\n") }
                let answers = clients.map { $0.readToEnd() }
                let replies = answers.filter { !$0.isEmpty }.compactMap { try? Self.object($0) }
                #expect(replies.count == answers.filter { !$0.isEmpty }.count, "every answer is one JSON line")
                #expect(replies.count == 100, "every client is answered (the limit is 256)")
                #expect(replies.allSatisfy { $0["ok"] as? Bool == true && $0["pid"] as? Int == Int(getpid()) })

                try hog.hold(0.85, of: cgroup, besides: overhead)
                let warning = try await next(&iterator)
                #expect(warning.level == .warning, "level events still flow")
                guard case .status(let status) = try ControlClient.send(.status, to: socket) else {
                    Issue.record("a status request got another reply")
                    return
                }
                #expect(status.level == .warning && status.limitBytes == 64 << 20)
                #expect(status.cgroupPath == cgroup.location.path && monitor.level == .warning)
                for client in silent { client.close() }
            }
            hog.terminate()
        }
    }

    @Test func aClientOfAnotherUserIsRefused() async throws {
        try await Self.withServingMonitor { _, socket, _ in
            // Loosened for the test only, so that uid 65534 can reach the socket at all.
            let directory = String(socket[..<socket.lastIndex(of: "/")!])
            let parent = String(directory[..<directory.lastIndex(of: "/")!])
            #expect(chmod(parent, 0o711) == 0 && chmod(directory, 0o711) == 0 && chmod(socket, 0o666) == 0)
            let result = try ChildProcess.run(
                ChildProcess.asNobody + [ChildProcess.productsDirectory + "/memwarn", "trigger", "--pid", "\(getpid())"],
                environment: ["XDG_RUNTIME_DIR=\(parent)"])
            #expect(result.status != 0)
            let program = try String(contentsOfFile: "/proc/self/comm", encoding: .utf8).trimmingCharacters(in: .newlines)
            #expect(
                result.standardError
                    == "Error: process \(getpid()) (\(program)): refused: uid 65534 may not control process \(getpid()) (only uid \(geteuid()) and root may)\n")
            #expect(result.standardOutput.isEmpty)
            #expect(try ControlClient.send(.status, to: socket).isSuccess, "the owner is still served")
        }
    }

    // MARK: Helpers

    /// `directory` is `<scratch>/memwarn`, not yet created (the endpoint makes it); the
    /// scratch directory is removed afterwards.
    static func withControlDirectory<T>(_ body: (_ directory: String) async throws -> T) async throws -> T {
        let scratch = ScratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: scratch.path) }
        return try await body(scratch.file("memwarn"))
    }

    static func configuration(cgroupPath: String? = nil) -> MonitorConfiguration {
        var configuration = MonitorConfiguration(cgroupPath: cgroupPath, environment: [:])
        configuration.policy.holdTime = .milliseconds(300)
        configuration.watchesPressureStall = false
        return configuration
    }

    /// Runs `service` while `body` runs, with the socket it serves (`nil` when it serves none);
    /// returns once the service has stopped.
    static func serving<T>(_ service: ControlService, _ body: (String?) async throws -> T) async throws -> T {
        let running = Task { await service.run() }
        let socket = await service.started()
        let result: Result<T, any Error>
        do {
            result = .success(try await body(socket))
        } catch {
            result = .failure(error)
        }
        running.cancel()
        await running.value
        return try result.get()
    }

    /// Runs a monitor (on this process's own cgroup unless `cgroupPath` is given) with its
    /// endpoint in a fresh directory, or in `directory`, and calls `body` once its first
    /// event is out, with the socket's path and the monitor's event iterator.
    @Test func anAgentsCoordinateLeasesAnAncestorAndLeaseZeroEndsIt() async throws {
        try await Self.withServingMonitor { monitor, socket, _ in
            let own = try #require(monitor.latestEvent?.snapshot.cgroup?.path)
            let parent = try #require(CgroupLocation(version: .v1, mountPoint: "/", path: own).parent?.path, "the test cgroup has a parent")
            let granted = try Self.object(ControlClient.exchange(ControlRequest.coordinate(cgroupPath: parent, lease: .seconds(5)).line, with: socket))
            #expect(granted["ok"] as? Bool == true && granted["cgroup"] as? String == parent && granted["leaseMilliseconds"] as? Int == 5000, "\(granted)")
            // The lease is held for the peer that asked: this process, by SO_PEERCRED.
            #expect(monitor.coordinatedCgroups == [parent: getpid()])
            let ended = try Self.object(ControlClient.exchange(ControlRequest.coordinate(cgroupPath: parent, lease: .zero).line, with: socket))
            #expect(ended["ok"] as? Bool == true && monitor.coordinatedCgroups.isEmpty, "\(ended)")
            let own1 = try Self.object(ControlClient.exchange(ControlRequest.coordinate(cgroupPath: own, lease: .seconds(5)).line, with: socket))
            #expect(own1["ok"] as? Bool == false, "the service's own cgroup is never leased: \(own1)")
            // A refusal that will not change says so: an agent stops asking (any other is asked again).
            #expect((own1["error"] as? String)?.hasPrefix(ControlRequest.refusedForGood) == true, "\(own1)")
        }
    }

    /// The status reply carries the cgroups a node agent coordinates for the service: without
    /// them, no CLI could show a service's lease.
    @Test func theStatusReplyCarriesTheCgroupsANodeAgentCoordinates() async throws {
        try await Self.withServingMonitor { monitor, socket, _ in
            let own = try #require(monitor.latestEvent?.snapshot.cgroup?.path)
            let parent = try #require(CgroupLocation(version: .v1, mountPoint: "/", path: own).parent?.path, "the test cgroup has a parent")
            let none = try Self.object(ControlClient.exchange(ControlRequest.status.line, with: socket))
            #expect(none["coordinatedCgroups"] as? [String] == [], "every key is present: \(none)")
            _ = try ControlClient.send(.coordinate(cgroupPath: parent, lease: .seconds(5)), to: socket)
            let leased = try Self.object(ControlClient.exchange(ControlRequest.status.line, with: socket))
            #expect(leased["coordinatedCgroups"] as? [String] == [parent], "\(leased)")
            guard case .status(let status) = try ControlClient.send(.status, to: socket) else {
                Issue.record("a status request got another reply")
                return
            }
            #expect(status.coordinatedCgroups == [parent], "and it reads back")
            _ = try ControlClient.send(.coordinate(cgroupPath: parent, lease: .zero), to: socket)
            let ended = try Self.object(ControlClient.exchange(ControlRequest.status.line, with: socket))
            #expect(ended["coordinatedCgroups"] as? [String] == [], "the lease ended: \(ended)")
        }
    }

    static func withServingMonitor<T: Sendable>(
        directory: String? = nil, coordinator: ReleaseCoordinator = ReleaseCoordinator(trimsHeap: false), cgroupPath: String? = nil,
        _ body: (PressureMonitor, String, inout AsyncStream<LevelEvent>.Iterator) async throws -> T
    ) async throws -> T {
        guard let directory else {
            return try await withControlDirectory { try await withServingMonitor(directory: $0, coordinator: coordinator, cgroupPath: cgroupPath, body) }
        }
        let monitor = PressureMonitor(configuration: configuration(cgroupPath: cgroupPath), logger: testLogger)
        let control = ControlService(monitor: monitor, coordinator: coordinator, directory: directory, environment: [:], logger: testLogger)
        return try await withRunningMonitor(monitor) { iterator in
            _ = try await next(&iterator)
            return try await serving(control) { socket in try await body(monitor, try #require(socket), &iterator) }
        }
    }

    /// Caches named as given, holding that many MiB each.
    static func caches(_ mebibytes: [String: Int], registeredWith coordinator: ReleaseCoordinator) -> [DiscardableCache<Int, [UInt8]>] {
        mebibytes.map { name, size in
            let cache = DiscardableCache<Int, [UInt8]>(coordinator: coordinator)
            cache.name = name
            for key in 0..<size { cache.setObject([UInt8](repeating: 1, count: 16), forKey: key, cost: mebibyte) }
            return cache
        }
    }

    static func object(_ line: String) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
    }

    static func consumerNames(_ socket: String) throws -> [String] {
        guard case .status(let status) = try ControlClient.send(.status, to: socket) else { return [] }
        return status.consumers.map(\.name)
    }

    static func status(of path: String) throws -> stat {
        var status = stat()
        try #require(lstat(path, &status) == 0, "lstat \(path)")
        return status
    }

    /// What an endpoint that refused a directory or folder another user made says to do (this
    /// process's uid).
    static func whatToDo(removing taken: String = "it") -> String {
        "Remove \(taken) as root, and have the control directory made for uid \(geteuid()) before the service starts, in a folder only root may write "
            + "(on Kubernetes: /run/memwarn/pods root's, mode 0755, and pod.yaml's init container; see Examples/kubernetes/README.md)"
    }

    /// A logger that keeps what is logged at `info` and above, a line each: the level, the
    /// message and the metadata (`key=value`, by key).
    final class LogRecorder: Sendable {
        private let recorded = Locked<[String]>([])
        var lines: [String] { recorded.withLock { $0 } }
        var logger: Logger { Logger(label: "memwarn.tests.recorded") { _ in Handler(recorded: self.recorded) } }

        struct Handler: LogHandler {
            let recorded: Locked<[String]>
            var metadata: Logger.Metadata = [:]
            var logLevel: Logger.Level = .info

            subscript(metadataKey key: String) -> Logger.Metadata.Value? {
                get { metadata[key] }
                set { metadata[key] = newValue }
            }

            func log(event: LogEvent) {
                let fields = metadata.merging(event.metadata ?? [:]) { $1 }.sorted { $0.key < $1.key }.map { " \($0.key)=\($0.value)" }
                recorded.withLock { $0.append("\(event.level) \(event.message)" + fields.joined()) }
            }
        }
    }

    static func endpointError(_ directory: String) -> String? {
        do {
            let endpoint = try ControlEndpoint(directory: directory)
            Issue.record("an endpoint started in \(directory): \(endpoint.socketPath)")
            return nil
        } catch {
            return error.message
        }
    }

    /// Binds a socket at `path` and closes it: the file a process that died leaves behind.
    static func leaveSocketFile(at path: String) throws {
        let socket = try FileDescriptor.unixStreamSocket(nonBlocking: false)
        try socket.bind(to: try UnixSocketAddress(path: path))
    }
}

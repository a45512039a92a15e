import CgroupKit
import MemwarnRelease
import MemwarnSystem
import MemwarnTestFixtures
import MemwarnTestKit
import MemwarnTestTraits
import Testing

@testable import MemwarnMonitor

#if canImport(Glibc)
import Glibc
#endif

/// The inotify and systemd sources on real files.
@Suite(.serialized, .tags(.root, .cgroupV1, .cgroupV2), .needsRealCgroups, .needsUnifiedCgroups)
struct KernelNotificationTests {
    /// cgroup v2 `memory.events` cannot exist here (no memory controller on cgroup2), but
    /// `cgroup.events` is raised by the same kernfs notification: a process joining and
    /// leaving a group flips `populated`.
    @Test func aKernfsFileChangeWakesTheInotifyWatch() async throws {
        try await withUnifiedTestCgroup { cgroup in
            let watch = try InotifyWatch(modificationsOf: cgroup.location.file("cgroup.events"))
            #expect(try !watch.descriptor.waitUntilReady(timeout: .zero), "nothing has changed yet")
            let hog = try MemoryHog()
            try KernelFiles.host.write(String(hog.pid), to: cgroup.location.file("cgroup.procs"))
            #expect(try watch.descriptor.waitUntilReady(timeout: .seconds(5)))
            #expect(try watch.drain() == false)
            #expect(try KernelFiles.host.read(cgroup.location.file("cgroup.events")).contains("populated 1"))
            hog.terminate()
            #expect(try watch.descriptor.waitUntilReady(timeout: .seconds(5)))
            _ = try watch.drain()
        }
    }

    @Test func systemdsFIFOWakesTheMonitorAsAWarning() async throws {
        let fifo = "/tmp/memwarn-test-fifo-\(getpid())"
        unlink(fifo)
        #expect(mkfifo(fifo, 0o600) == 0)
        defer { unlink(fifo) }
        try await withTestCgroup(limit: 64 << 20) { cgroup in
            var configuration = MonitorConfiguration(cgroupPath: cgroup.location.directory, environment: ["MEMORY_PRESSURE_WATCH": fifo])
            configuration.watchesPressureStall = false
            configuration.policy.holdTime = .seconds(30)
            let monitor = PressureMonitor(configuration: configuration, logger: testLogger)
            try await withRunningMonitor(monitor) { iterator in
                _ = try await next(&iterator)
                #expect(monitor.watchedSources.contains("systemd \(fifo)"))
                try FileDescriptor.open(fifo, O_WRONLY | O_NONBLOCK).writeWhole([1])
                let event = try await next(&iterator)
                #expect(event.level == .warning)
                #expect(event.source == .systemd)
            }
        }
    }

    /// systemd's FIFO was dropped at the first writer's end of file, so a second
    /// writer was never heard.
    @Test(.timeLimit(.minutes(1))) func systemdsFIFOHearsEveryWriter() async throws {
        let fifo = "/tmp/memwarn-test-fifo-writers-\(getpid())"
        unlink(fifo)
        #expect(mkfifo(fifo, 0o600) == 0)
        defer { unlink(fifo) }
        try await withTestCgroup(limit: 64 << 20) { cgroup in
            let monitor = PressureMonitor(configuration: systemdWatchConfiguration(cgroup, watching: fifo), logger: testLogger)
            try await withRunningMonitor(monitor) { iterator in
                _ = try await next(&iterator)
                for writer in 1...3 {
                    let end = try FileDescriptor.open(fifo, O_WRONLY | O_NONBLOCK)
                    try end.writeWhole([UInt8(writer)])
                    try end.close()  // each writer ends its own end: no end of file for the monitor
                    let warning = try await next(&iterator)
                    #expect(warning.level == .warning && warning.source == .systemd, "writer \(writer): \(warning)")
                    let calm = try await next(&iterator)
                    #expect(calm.level == .normal, "writer \(writer): \(calm)")
                }
                #expect(monitor.watchedSources.contains("systemd \(fifo)"))
            }
        }
    }

    /// systemd's socket was blocking, so the drain after the first notification
    /// waited forever for a "would block": no further levels, and the monitor could not stop.
    /// The time limit is the failure this test would show.
    @Test(.timeLimit(.minutes(1))) func systemdsSocketIsHeardAtEveryNotificationAndTheMonitorStillStops() async throws {
        let path = "/tmp/memwarn-test-socket-\(getpid())"
        unlink(path)
        defer { unlink(path) }
        let listener = try FileDescriptor.unixStreamSocket(nonBlocking: false)
        try listener.bind(to: UnixSocketAddress(path: path))
        try listener.listen(backlog: 4)
        try await withTestCgroup(limit: 64 << 20) { cgroup in
            let monitor = PressureMonitor(configuration: systemdWatchConfiguration(cgroup, watching: path), logger: testLogger)
            try await withRunningMonitor(monitor) { iterator in
                _ = try await next(&iterator)
                #expect(monitor.watchedSources.contains("systemd \(path)"))
                guard let connection = try listener.acceptConnection() else {
                    Issue.record("the monitor did not connect while it armed")
                    return
                }
                for notification in 1...3 {
                    #expect(try connection.send([UInt8(notification)][...]) == 1)
                    let warning = try await next(&iterator)
                    #expect(warning.level == .warning && warning.source == .systemd, "notification \(notification): \(warning)")
                    let calm = try await next(&iterator)
                    #expect(calm.level == .normal, "notification \(notification): \(calm)")
                }
            }
        }
    }

    private func systemdWatchConfiguration(_ cgroup: TestCgroup, watching path: String) -> MonitorConfiguration {
        var configuration = MonitorConfiguration(cgroupPath: cgroup.location.directory, environment: ["MEMORY_PRESSURE_WATCH": path])
        configuration.watchesPressureStall = false
        configuration.policy.holdTime = .milliseconds(100)
        return configuration
    }

    @Test func systemdsPSIFileGetsTheDecodedTriggerWritten() async throws {
        try await withUnifiedTestCgroup { cgroup in
            let path = cgroup.location.file("memory.pressure")
            // "some 200000 2000000" in base64, as systemd passes MEMORY_PRESSURE_WRITE.
            let watch = try #require(
                try SystemdPressureWatch.fromEnvironment([
                    "MEMORY_PRESSURE_WATCH": path, "MEMORY_PRESSURE_WRITE": "c29tZSAyMDAwMDAgMjAwMDAwMA==",
                ]))
            #expect(watch.events == .priority)
            #expect(try SystemdPressureWatch.fromEnvironment(["MEMORY_PRESSURE_WATCH": "/dev/null"]) == nil)
            #expect(throws: CgroupError.self) {
                _ = try SystemdPressureWatch.fromEnvironment(["MEMORY_PRESSURE_WATCH": path, "MEMORY_PRESSURE_WRITE": "not base64!"])
            }
        }
    }

    @Test func base64DecodesWhatSystemdEncodes() {
        #expect(Base64.decode("c29tZSAyMDAwMDAgMjAwMDAwMA==").map { String(decoding: $0, as: UTF8.self) } == "some 200000 2000000")
        #expect(Base64.decode("YQ==") == [97])
        #expect(Base64.decode("a*b") == nil)
        #expect(Base64.decode("YQ=a") == nil)
    }
}

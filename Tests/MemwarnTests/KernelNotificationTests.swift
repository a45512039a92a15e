import CgroupKit
import MemwarnSystem
import MemwarnTestKit
import MemwarnTestTraits
import Testing
#if canImport(Glibc)
import Glibc
#endif
@testable import Memwarn

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

    @Test func systemdsPSIFileGetsTheDecodedTriggerWritten() async throws {
        try await withUnifiedTestCgroup { cgroup in
            let path = cgroup.location.file("memory.pressure")
            // "some 200000 2000000" in base64, as systemd passes MEMORY_PRESSURE_WRITE.
            let watch = try #require(try SystemdPressureWatch.fromEnvironment([
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

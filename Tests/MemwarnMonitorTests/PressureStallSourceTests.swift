import CgroupKit
import Foundation
import MemwarnRelease
import MemwarnSystem
import MemwarnTestKit
import MemwarnTestTraits
import Testing

@testable import MemwarnMonitor

#if canImport(Glibc)
import Glibc
#endif

/// PSI triggers and their fallback, on a real cgroup2 group's `memory.pressure`.
struct PressureStallSourceTests {
    static var privileged: Bool { (try? Capabilities.effective(Capabilities.sysResource)) ?? false }

    @Test func anUnprivilegedWindowIsRoundedUpToAMultipleOfTwoSeconds() {
        #expect(PressureTrigger.acceptedWindow(.milliseconds(500), privileged: false) == .seconds(2))
        #expect(PressureTrigger.acceptedWindow(.seconds(2), privileged: false) == .seconds(2))
        #expect(PressureTrigger.acceptedWindow(.milliseconds(2500), privileged: false) == .seconds(4))
        #expect(PressureTrigger.acceptedWindow(.milliseconds(500), privileged: true) == .milliseconds(500))
    }

    @Test(.tags(.root, .cgroupV2), .needsUnifiedCgroups) func aTriggerIsRegisteredOnARealCgroup2GroupWithTheRoundedWindow() async throws {
        try await withUnifiedTestCgroup { cgroup in
            let path = cgroup.location.file("memory.pressure")
            let watch = try PressureWatch.make(path: path, kind: .some, percent: 10, window: .seconds(1), privileged: Self.privileged)
            guard case .trigger(let trigger) = watch else {
                Issue.record("the kernel refused the trigger: \(watch)")
                return
            }
            #expect(trigger.window == (Self.privileged ? .seconds(1) : .seconds(2)))
            #expect(trigger.threshold == trigger.window * 0.1)
            // Nothing stalls in an empty group: the trigger must not fire.
            #expect(try !trigger.descriptor.waitUntilReady(for: .priority, timeout: .zero))
        }
    }

    /// The fact ``PressureTrigger/acceptedWindow(_:privileged:)`` rounds for: the kernel refuses a
    /// window that is not a multiple of 2 s from a writer without `CAP_SYS_RESOURCE`. The suite
    /// runs as root, so the writer is a child started without the capability (`setpriv`).
    @Test(.tags(.root, .cgroupV2), .needsUnifiedCgroups) func theKernelRefusesAnUnroundedWindowWithoutCapSysResource() async throws {
        try await withUnifiedTestCgroup { cgroup in
            let path = cgroup.location.file("memory.pressure")
            func register(_ trigger: String) throws(ChildProcessError) -> String {
                let result = try ChildProcess.run([
                    "/usr/bin/setpriv", "--bounding-set", "-sys_resource", "--inh-caps", "-sys_resource", "/usr/bin/python3", "-c",
                    """
                    import os, sys
                    fd = os.open(sys.argv[1], os.O_RDWR | os.O_NONBLOCK)
                    try:
                        os.write(fd, (sys.argv[2] + "\\0").encode()); print("accepted")
                    except OSError as error:
                        print("errno", error.errno)
                    """, path, trigger,
                ])
                return result.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines) + result.standardError
            }
            let unrounded = try register("some 100000 1000000")
            let rounded = try register("some 200000 2000000")
            #expect(unrounded == "errno \(EINVAL)", "a 1 s window, unprivileged")
            #expect(rounded == "accepted", "the window rounded up to 2 s")
        }
    }

    @Test(.tags(.root, .cgroupV2), .needsUnifiedCgroups) func aTriggerTheKernelRefusesFallsBackToSamplingTheTotal() async throws {
        try await withUnifiedTestCgroup { cgroup in
            let path = cgroup.location.file("memory.pressure")
            // A threshold longer than its window is invalid: the real kernel answers EINVAL.
            let watch = try PressureWatch.make(path: path, kind: .some, percent: 10, window: .seconds(2), privileged: false, threshold: .seconds(3))
            guard case .sampling(var sampler) = watch else {
                Issue.record("expected the sampling fallback, got \(watch)")
                return
            }
            #expect(sampler.reason.errno == EINVAL)
            #expect(sampler.reason.description.contains(path))
            let start = ContinuousClock.now
            let before = PressureStall(some: .init(avg10: 0, avg60: 0, avg300: 0, total: 1_000_000), full: nil)
            let after = PressureStall(some: .init(avg10: 0, avg60: 0, avg300: 0, total: 1_250_000), full: nil)
            #expect(sampler.sample(before, at: start) == nil)
            let measured = sampler.sample(after, at: start + .seconds(1))
            let percent = try #require(measured)
            #expect(abs(percent - 25) < 0.001)
            let real = try PressureStall.parse(KernelFiles.host.read(path), path: path)
            let backwards = sampler.sample(real, at: start + .seconds(2))
            #expect(backwards == nil, "a total that went backwards is no reading")
        }
    }

    /// A container's view: runc and crun mount the cgroup file system read-only, so opening
    /// `memory.pressure` for writing fails with `EROFS`. The group is bind-mounted read-only
    /// (root, for `mount`) under a private temporary folder, unmounted whatever happens.
    @Test(.tags(.root, .cgroupV2), .needsUnifiedCgroups) func aTriggerOnAReadOnlyCgroupMountFallsBackToSampling() async throws {
        try await withUnifiedTestCgroup { cgroup in
            let mountPoint = try FileSystem.makeUniqueDirectory(template: NSTemporaryDirectory() + "/memwarn-ro-cgroup-XXXXXX")
            defer { try? FileSystem.removeDirectory(mountPoint) }
            let bound = try ChildProcess.run(["/bin/mount", "--bind", cgroup.location.directory, mountPoint])
            try #require(bound.status == 0, "mount --bind: \(bound.standardError)")
            defer { _ = try? ChildProcess.run(["/bin/umount", mountPoint]) }
            let readOnly = try ChildProcess.run(["/bin/mount", "-o", "remount,bind,ro", mountPoint])
            try #require(readOnly.status == 0, "mount -o remount,bind,ro: \(readOnly.standardError)")
            let path = mountPoint + "/memory.pressure"
            let watch = try PressureWatch.make(path: path, kind: .some, percent: 10, window: .seconds(2), privileged: Self.privileged)
            guard case .sampling(let sampler) = watch else {
                Issue.record("expected the sampling fallback on a read-only mount, got \(watch)")
                return
            }
            #expect(sampler.reason.errno == EROFS)
            #expect(sampler.reason.description.contains(path))
            // The file is still read: sampling works on the read-only mount.
            _ = try PressureStall.parse(KernelFiles.host.read(path), path: path)
        }
    }

    @Test func aMissingPressureFileFallsBackInsteadOfFailing() throws {
        let watch = try PressureWatch.make(
            path: "/sys/fs/cgroup/unified/memwarn-no-such-group/memory.pressure", kind: .full, percent: 5, window: .seconds(2), privileged: false)
        guard case .sampling(let sampler) = watch else {
            Issue.record("expected the sampling fallback")
            return
        }
        #expect(sampler.reason.errno == ENOENT)
    }
}

import MemwarnSystem

#if canImport(Glibc)
import Glibc
#endif

/// `memwarn-v2-scenarios --in-container PROGRAM [ARGS…]`: runs PROGRAM as a container runtime
/// (runc, containerd, Kubernetes on cgroup v2) starts a container's process: in a new cgroup
/// namespace rooted at the cgroup it was started in, and a new mount namespace where cgroup2 is
/// mounted afresh at `/sys/fs/cgroup`, so `/proc/self/cgroup` reads `0::/` and
/// `/sys/fs/cgroup` is the container's own cgroup, with its `memory.max`. Start it in the pod's
/// cgroup (``LineChild`` with a cgroup does). Exits 127 with the reason when a step fails.
enum ContainerEntry {
    static func run(_ arguments: [String]) -> Never {
        guard let program = arguments.first else { fail("usage: memwarn-v2-scenarios --in-container PROGRAM [ARGS…]") }
        do { try Namespaces.unshare([.cgroup, .mount]) } catch { fail("unshare") }
        // Our mounts must not propagate back (initramfs mounts are private already: EINVAL is fine).
        guard mount(nil, "/", nil, UInt(MS_REC | MS_PRIVATE), nil) == 0 || errno == EINVAL else { fail("mount --make-rprivate /") }
        guard umount2("/sys/fs/cgroup", Int32(MNT_DETACH)) == 0 else { fail("umount /sys/fs/cgroup") }
        guard mount("cgroup2", "/sys/fs/cgroup", "cgroup2", 0, nil) == 0 else { fail("mount cgroup2 /sys/fs/cgroup") }
        var argv = arguments.map { strdup($0) } + [nil]
        execv(program, &argv)
        fail("exec \(program)")
    }

    private static func fail(_ step: String) -> Never {
        let reason = errno == 0 ? "" : ": " + String(cString: strerror(errno))
        StandardStream.error.writeLine("memwarn-v2-scenarios --in-container: \(step)\(reason)")
        exit(127)
    }
}

import CgroupKit
import MemwarnSystem

#if canImport(Glibc)
import Glibc
#endif

/// A cgroup with no limit of its own beside a soak's run, for the soak's load and check: what
/// they start, in whatever process group or session, is found there. It is named as a run's
/// cgroup is (`memwarn-soak-<pid>-<n>`) and locked while it is in use, so that a soak killed
/// before it could clean up (SIGKILL, the OOM killer) leaves it to the next run's start, which
/// kills what it holds and removes it (``ConstrainedRun/removeLeftovers(in:logger:)``): nothing
/// the load started outlives that.
final class HelperCgroup: Sendable {
    /// Where it is: beside the run's cgroup.
    let location: CgroupLocation
    /// Its lock, held until it is removed (``ConstrainedRun/claimIfAbandoned(_:owner:)``).
    private let claim: DirectoryLock

    /// Makes one beside `run`'s cgroup, exclusively: a cgroup that has the name already is never
    /// adopted (the next number is tried).
    ///
    /// - Throws: `CgroupError` when it cannot be made or locked.
    init(beside run: ConstrainedRun) throws(CgroupError) {
        let parent = run.cgroup.location.parent ?? run.cgroup.location
        while true {
            let location = parent.child("\(run.options.namePrefix)-\(getpid())-\(ConstrainedRun.nextCgroupNumber())")
            do {
                try FileSystem.makeDirectory(location.directory, mode: 0o755)
            } catch  where error.errno == EEXIST {
                continue
            } catch {
                throw KernelFiles.openError(error.errno, location.directory, writing: true)
            }
            do {
                claim = try ConstrainedRun.claim(location)
            } catch {
                try? FileSystem.removeDirectory(location.directory)
                throw error
            }
            self.location = location
            return
        }
    }

    /// The file a child writes itself into between `fork` and `exec` (``ChildSpawn/cgroupProcsFile``).
    var procsFile: String { location.file("cgroup.procs") }

    /// Kills whatever is still in it, then removes it.
    ///
    /// - Returns: whether it is gone.
    @discardableResult
    func remove() -> Bool {
        withExtendedLifetime(claim) { ConstrainedRun.killProcessesAndRemove(location).removed }
    }
}

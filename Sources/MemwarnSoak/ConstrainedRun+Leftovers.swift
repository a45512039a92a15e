package import CgroupKit
package import Logging
import MemwarnSystem

#if canImport(Glibc)
import Glibc
#endif

extension ConstrainedRun {
    /// A cgroup an earlier run left behind (its `memwarn` process was killed before it could
    /// clean up), as found and removed by a later run.
    package struct Leftover: Sendable, Hashable, Codable, CustomStringConvertible {
        /// The cgroup's directory.
        package var cgroup: String
        /// The pid of the `memwarn` process that made it, no longer running.
        package var ownerPID: Int32
        /// The processes still in it, killed (the dead run's command and its descendants, or a soak's load's).
        package var processesKilled: Int
        /// Whether the cgroup is gone.
        package var removed: Bool

        /// "removed <cgroup>, left by memwarn pid <pid>, which is gone (n leftover processes killed)".
        package var description: String {
            (removed ? "removed \(cgroup)" : "could NOT remove \(cgroup)") + ", left by memwarn pid \(ownerPID), which is gone"
                + " (\(processesKilled) leftover process\(processesKilled == 1 ? "" : "es") killed)"
        }
    }

    /// The prefixes of the cgroups runs make: `<prefix>-<owner pid>-<n>`.
    static let leftoverPrefixes = ["memwarn-run", "memwarn-soak"]

    /// The owner pid a run cgroup's name records (`memwarn-run-1234-1` → 1234), or `nil` for
    /// a name that is not a run's.
    static func ownerPID(ofRunCgroup name: String) -> Int32? {
        for prefix in leftoverPrefixes where name.hasPrefix(prefix + "-") {
            let parts = name.dropFirst(prefix.count + 1).split(separator: "-")
            guard parts.count == 2, let pid = Int32(parts[0]), pid > 0, Int(parts[1]) != nil else { return nil }
            return pid
        }
        return nil
    }

    /// The run cgroup at `location`, named for `owner`, when it is proven abandoned — its lock,
    /// then held by the caller while it cleans up; `nil` for one that may still be in use.
    /// Proven: its owner pid is not alive in this PID namespace (runs made before the lock
    /// existed are judged by that alone), and its lock can be taken — a run holds it from just
    /// after it made the cgroup until it ends, in whatever PID namespace it runs. Holding the lock
    /// while cleaning up also keeps a run that made the cgroup a moment ago from starting in it.
    static func claimIfAbandoned(_ location: CgroupLocation, owner: Int32) -> DirectoryLock? {
        guard !Signals.processExists(owner) else { return nil }
        return try? DirectoryLock(holding: location.directory)
    }

    /// Takes the lock that tells later runs and `memwarn status` that the run cgroup (or the
    /// leaf) at `location` is in use (``claimIfAbandoned(_:owner:)``).
    ///
    /// - Throws: `CgroupError` when the directory cannot be opened or locked.
    static func claim(_ location: CgroupLocation) throws(CgroupError) -> DirectoryLock {
        do {
            return try DirectoryLock(holding: location.directory)
        } catch {
            let why = error.errno == EWOULDBLOCK ? "another memwarn is removing it as a leftover; try again" : error.reason
            throw CgroupError(.unwritable, "could not lock the run's cgroup (\(why))", path: location.directory, errno: error.errno)
        }
    }

    /// Removes the run cgroups under `parent` that are proven abandoned (``claimIfAbandoned(_:owner:)``)
    /// — killing what the dead run's command left in them — and says so in the log. A cgroup
    /// whose run may still be alive (its owner pid alive here, or its lock held) is
    /// left alone: its command is never killed on a guess.
    package static func removeLeftovers(in parent: CgroupLocation, logger: Logger) -> [Leftover] {
        var leftovers: [Leftover] = []
        for name in (try? KernelFiles.host.list(parent.directory)) ?? [] {
            guard let owner = ownerPID(ofRunCgroup: name) else { continue }
            let location = parent.child(name)
            guard let claim = claimIfAbandoned(location, owner: owner) else { continue }
            defer { withExtendedLifetime(claim) {} }
            let (killed, removed) = killProcessesAndRemove(location)
            let leftover = Leftover(cgroup: location.directory, ownerPID: owner, processesKilled: killed, removed: removed)
            logger.notice(
                "removed the cgroup of a run whose memwarn process is gone",
                metadata: [
                    "cgroup": "\(leftover.cgroup)", "owner": "\(owner)", "killed": "\(killed)", "removed": "\(removed)",
                ])
            leftovers.append(leftover)
        }
        return leftovers
    }

    /// Kills every process in the cgroup at `location` (for up to a second, as they are found:
    /// one may fork meanwhile), then removes it (retried for up to a second, while the kernel
    /// still holds it busy).
    ///
    /// - Returns: how many processes were killed, and whether the cgroup is gone.
    static func killProcessesAndRemove(_ location: CgroupLocation) -> (killed: Int, removed: Bool) {
        var killed = 0
        for _ in 0..<50 {
            let left = ((try? KernelFiles.host.read(location.file("cgroup.procs"))) ?? "").split(separator: "\n").compactMap { Int32($0) }
            if left.isEmpty { break }
            // A process outside this PID namespace reads as 0: never kill(0), this process's group.
            for process in left where process > 0 && (try? Signals.send(SIGKILL, to: process)) != nil { killed += 1 }
            SystemThread.sleep(for: .milliseconds(20))
        }
        var removed = false
        for _ in 0..<50 {
            do {
                try FileSystem.removeDirectory(location.directory)
                removed = true
            } catch {
                removed = error.errno == ENOENT
            }
            if removed { break }
            SystemThread.sleep(for: .milliseconds(20))
        }
        return (killed, removed)
    }
}

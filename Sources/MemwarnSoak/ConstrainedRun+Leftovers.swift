public import CgroupKit
public import Logging
#if canImport(Glibc)
import Glibc
#endif

extension ConstrainedRun {
    /// A cgroup an earlier run left behind (its `memwarn` process was killed before it could
    /// clean up), as found and removed by a later run.
    public struct Leftover: Sendable, Hashable, Codable, CustomStringConvertible {
        /// The cgroup's directory.
        public var cgroup: String
        /// The pid of the `memwarn` process that made it, no longer running.
        public var ownerPID: Int32
        /// The processes still in it, killed (the dead run's command and its descendants).
        public var processesKilled: Int
        /// Whether the cgroup is gone.
        public var removed: Bool

        /// "removed <cgroup>, left by memwarn pid <pid>, which is gone (n leftover processes killed)".
        public var description: String {
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

    /// Removes the run cgroups under `parent` whose owner is gone — killing what the dead run's
    /// command left in them — and says so in the log. A cgroup whose owner pid is alive (a
    /// concurrent run, or a reused pid) is left alone.
    public static func removeLeftovers(in parent: CgroupLocation, logger: Logger) -> [Leftover] {
        var leftovers: [Leftover] = []
        for name in (try? KernelFiles.host.list(parent.directory)) ?? [] {
            guard let owner = ownerPID(ofRunCgroup: name), kill(owner, 0) != 0, errno == ESRCH else { continue }
            let location = parent.child(name)
            var killed = 0
            for _ in 0..<50 {
                let left = ((try? KernelFiles.host.read(location.file("cgroup.procs"))) ?? "").split(separator: "\n").compactMap { Int32($0) }
                if left.isEmpty { break }
                for process in left where kill(process, SIGKILL) == 0 { killed += 1 }
                usleep(20_000)
            }
            var removed = false
            for _ in 0..<50 {
                if rmdir(location.directory) == 0 || errno == ENOENT {
                    removed = true
                    break
                }
                usleep(20_000)
            }
            let leftover = Leftover(cgroup: location.directory, ownerPID: owner, processesKilled: killed, removed: removed)
            logger.notice("removed the cgroup of a run whose memwarn process is gone", metadata: [
                "cgroup": "\(leftover.cgroup)", "owner": "\(owner)", "killed": "\(killed)", "removed": "\(removed)",
            ])
            leftovers.append(leftover)
        }
        return leftovers
    }
}

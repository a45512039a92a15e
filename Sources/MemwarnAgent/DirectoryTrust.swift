import MemwarnSystem

#if canImport(Glibc)
import Glibc
#endif

/// Which control directories the agent searches: only those that nobody but their owner can
/// change. The agent believes only the pid the kernel gives for a socket, so a socket cannot
/// lie its way into a round; but a directory others can write can be filled with sockets that
/// never answer, and a path through a symbolic link leads wherever its maker wants.
///
/// A directory is not searched when
/// - a component of its path is a symbolic link (`/run/shm` → `/dev/shm`, say);
/// - it is writable by its group or by others (a world-writable `/run/lock/memwarn` that a
///   pattern such as `/run/*/memwarn` matches).
///
/// A directory of one user's, mode 0700, is searched wherever it is (a service's own
/// `RuntimeDirectory=`, `/tmp/memwarn-<uid>`, a pod's `memwarn`, made 0700 for the pod's user by
/// its init container in the root-owned 0755 pod directory): only that user can put sockets
/// there, and its sockets are judged by their listeners' pids.
enum DirectoryTrust {
    /// Why `directory` is not searched, or `nil` when it is.
    ///
    /// - Parameter type: what is at the path, not following a link.
    static func refusal(of directory: String, type: FileType) -> String? {
        guard type == .directory else { return "not searched: not a directory (a symbolic link is not followed)" }
        var prefix = ""
        for component in directory.split(separator: "/") {
            prefix += "/" + component
            guard let status = try? FileStatus.at(prefix, followingLinks: false) else { return "not searched: \(prefix) cannot be read" }
            if status.type == .symbolicLink { return "not searched: \(prefix) in its path is a symbolic link" }
        }
        guard let status = try? FileStatus.at(directory, followingLinks: false) else { return "not searched: it cannot be read" }
        if status.permissions & 0o022 != 0 {
            return "not searched: writable by its group or others (mode \(String(status.permissions & 0o7777, radix: 8)))"
        }
        return nil
    }
}

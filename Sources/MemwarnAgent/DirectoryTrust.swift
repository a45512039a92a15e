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
/// - it is writable by its group or by others;
/// - it was found by a pattern (`/run/*/memwarn`) in a folder that its group or others may write
///   (`/run/lock`, sticky and world-writable, matches the pattern too: anyone may make a
///   `memwarn` there). A service's own runtime directory (`/run/my-service`, its user's, 0755)
///   is fine.
///
/// A named directory in a sticky folder (`/tmp/memwarn-<uid>`, owned by the uid it names) is
/// searched: nobody else can rename or replace it there.
enum DirectoryTrust {
    /// Why `directory` is not searched, or `nil` when it is.
    ///
    /// - Parameters:
    ///   - foundByPattern: whether a pattern with `*` matched it.
    ///   - type: what is at the path, not following a link.
    static func refusal(of directory: String, foundByPattern: Bool, type: FileType) -> String? {
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
        if foundByPattern {
            let folder = String(directory[..<(directory.lastIndex(of: "/") ?? directory.startIndex)])
            guard let above = try? FileStatus.at(folder.isEmpty ? "/" : folder, followingLinks: false) else { return "not searched: its folder cannot be read" }
            if above.permissions & 0o022 != 0 {
                return "not searched: a pattern matched it in \(folder), which its group or others may write"
            }
        }
        return nil
    }
}

#if canImport(Glibc)
import Glibc
#endif

/// What kind of file a path names (`stat`, or `lstat` when links are not followed).
package enum FileType: Sendable, Hashable {
    /// A regular file.
    case regular
    /// A directory.
    case directory
    /// A symbolic link (seen only when links are not followed).
    case symbolicLink
    /// A Unix socket.
    case socket
    /// A FIFO (a named pipe).
    case fifo
    /// A device.
    case other

    /// The kind a `st_mode` names.
    init(mode: mode_t) {
        switch mode & S_IFMT {
        case S_IFREG: self = .regular
        case S_IFDIR: self = .directory
        case S_IFLNK: self = .symbolicLink
        case S_IFSOCK: self = .socket
        case S_IFIFO: self = .fifo
        default: self = .other
        }
    }

    /// The kind of file at `path`, or `nil` when there is none or it cannot be examined.
    ///
    /// - Parameters:
    ///   - path: the path.
    ///   - followingLinks: whether a symbolic link is followed to what it names (`stat`) or
    ///     reported as such (`lstat`).
    package static func at(_ path: String, followingLinks: Bool = true) -> FileType? {
        (try? FileStatus.at(path, followingLinks: followingLinks))?.type
    }
}

import CLinuxCalls

#if canImport(Glibc)
import Glibc
#endif

/// What kind of file a path names (`stat`, or `lstat` when links are not followed).
package enum FileType: Sendable, Equatable {
    case regular
    case directory
    case symbolicLink
    /// A FIFO, a socket or a device.
    case other

    /// The kind of file at `path`, or `nil` when there is none or it cannot be examined.
    ///
    /// - Parameters:
    ///   - path: the path.
    ///   - followingLinks: whether a symbolic link is followed to what it names (`stat`) or
    ///     reported as such (`lstat`).
    package static func at(_ path: String, followingLinks: Bool = true) -> FileType? {
        var status = stat()
        guard (followingLinks ? stat(path, &status) : lstat(path, &status)) == 0 else { return nil }
        switch status.st_mode & S_IFMT {
        case S_IFREG: return .regular
        case S_IFDIR: return .directory
        case S_IFLNK: return .symbolicLink
        default: return .other
        }
    }
}

#if canImport(Glibc)
import Glibc
#endif

/// What the kernel says about a file (`stat`, `lstat`, `fstat`, `fstatat`): the few fields
/// memwarn decides by — its kind, permissions, owner and identity.
package struct FileStatus: Sendable, Hashable {
    /// Its kind; a symbolic link only when links were not followed.
    package var type: FileType
    /// The permission bits with set-user-ID, set-group-ID and sticky (`st_mode & 0o7777`).
    package var permissions: UInt32
    /// The uid that owns it (`st_uid`).
    package var owner: UInt32
    /// The device that holds it (`st_dev`): with ``inode``, which file it is.
    package var device: UInt64
    /// Its inode number on ``device`` (`st_ino`).
    package var inode: UInt64
    /// Its size in bytes (`st_size`): the length of a regular file; 0 for most kernel files.
    package var size: Int64

    /// Whether the sticky bit is set: in a directory, only a file's owner may remove or rename
    /// it (as in `/tmp`).
    package var isSticky: Bool { permissions & UInt32(S_ISVTX) != 0 }

    init(_ status: stat) {
        type = FileType(mode: status.st_mode)
        permissions = status.st_mode & 0o7777
        owner = status.st_uid
        device = UInt64(status.st_dev)
        inode = UInt64(status.st_ino)
        size = Int64(status.st_size)
    }

    /// The status of the file at `path`.
    ///
    /// - Parameters:
    ///   - path: the path.
    ///   - followingLinks: whether a symbolic link is followed to what it names (`stat`) or
    ///     described itself (`lstat`).
    /// - Returns: its status.
    /// - Throws: ``SystemError`` from `stat` or `lstat`, naming `path` (`ENOENT`: nothing is
    ///   there, or a followed link dangles).
    package static func at(_ path: String, followingLinks: Bool = true) throws(SystemError) -> FileStatus {
        var status = stat()
        if followingLinks {
            try Syscall.retrying("stat", path: path) { stat(path, &status) }
        } else {
            try Syscall.retrying("lstat", path: path) { lstat(path, &status) }
        }
        return FileStatus(status)
    }
}

extension FileDescriptor {
    /// The status of the open file (`fstat`).
    ///
    /// - Returns: its status.
    /// - Throws: ``SystemError`` from `fstat`.
    package borrowing func status() throws(SystemError) -> FileStatus {
        var status = stat()
        try Syscall.retrying("fstat") { fstat(rawValue, &status) }
        return FileStatus(status)
    }

    /// The status of `name` in the directory this descriptor has open (`fstatat`): the
    /// directory is the one opened, even when its path has since been swapped for another.
    ///
    /// - Parameters:
    ///   - name: a name in the directory (a relative path).
    ///   - followingLinks: whether a symbolic link is followed (`AT_SYMLINK_NOFOLLOW` unless).
    /// - Returns: its status.
    /// - Throws: ``SystemError`` from `fstatat`, naming `name` (`ENOENT`: no such entry).
    package borrowing func status(ofEntry name: String, followingLinks: Bool = true) throws(SystemError) -> FileStatus {
        var status = stat()
        let flags = followingLinks ? 0 : AT_SYMLINK_NOFOLLOW
        try Syscall.retrying("fstatat", path: name) { fstatat(rawValue, name, &status, flags) }
        return FileStatus(status)
    }
}

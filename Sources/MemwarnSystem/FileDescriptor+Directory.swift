#if canImport(Glibc)
import Glibc
#endif

extension FileDescriptor {
    /// Removes `name`, not a directory, from the directory this descriptor has open
    /// (`unlinkat`): the directory is the one opened, even when its path has since been swapped
    /// for another (a symbolic link planted meanwhile cannot send the removal elsewhere).
    ///
    /// - Parameter name: a name in the directory (a file, a socket, a symbolic link itself).
    /// - Throws: ``SystemError`` from `unlinkat`, naming `name` (`ENOENT`: it is gone already).
    package borrowing func removeEntry(_ name: String) throws(SystemError) {
        try Syscall.retrying("unlinkat", path: name) { unlinkat(rawValue, name, 0) }
    }
}

extension FileDescriptor {
    /// Opens `name` in the directory this descriptor has open (`openat`; `O_CLOEXEC` is always
    /// added): the directory is the one opened, whatever its path names by now.
    ///
    /// - Parameters:
    ///   - name: a name in the directory.
    ///   - flags: as `open(2)` takes them; `O_CREAT | O_EXCL | O_NOFOLLOW` makes a new file and
    ///     never opens what a symbolic link planted there names.
    ///   - mode: the permissions of a file `O_CREAT` makes (less the umask).
    /// - Returns: the open descriptor.
    /// - Throws: ``SystemError`` from `openat`, naming `name` (`EEXIST`: something is there
    ///   already, a link included, under `O_EXCL`).
    package borrowing func openEntry(_ name: String, _ flags: Int32, mode: UInt32 = 0) throws(SystemError) -> FileDescriptor {
        FileDescriptor(adopting: try Syscall.retrying("openat", path: name) { openat(rawValue, name, flags | O_CLOEXEC, mode_t(mode)) })
    }

    /// Renames `name` to `newName` in the directory this descriptor has open, in one step
    /// (`renameat`): whoever opens `newName` finds the old file or the new one, never half of
    /// one. What was at `newName` is replaced, a symbolic link itself (never what it names).
    ///
    /// - Throws: ``SystemError`` from `renameat`, naming `newName`.
    package borrowing func renameEntry(_ name: String, to newName: String) throws(SystemError) {
        try Syscall.retrying("renameat", path: newName) { renameat(rawValue, name, rawValue, newName) }
    }
}

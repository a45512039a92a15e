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

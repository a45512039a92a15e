#if canImport(Glibc)
import Glibc
#endif

/// The calls that make, remove, rename and examine names in the file system by path. Each
/// failure is a ``SystemError`` with the call's `errno` and the path.
package enum FileSystem {
    /// Makes a directory (`mkdir`); one that exists is an error, never adopted.
    ///
    /// - Parameters:
    ///   - path: the new directory.
    ///   - mode: its permissions, less the process's umask (as `mkdir` applies it).
    /// - Throws: ``SystemError`` from `mkdir` (`EEXIST`: something is there already; `EACCES`,
    ///   `EPERM`: not allowed; `ENOENT`: the folder above is missing).
    package static func makeDirectory(_ path: String, mode: UInt32) throws(SystemError) {
        try Syscall.retrying("mkdir", path: path) { mkdir(path, mode_t(mode)) }
    }

    /// Makes a directory with a name nobody could have chosen in advance (`mkdtemp`), mode
    /// 0700: it did not exist before, so nobody prepared it.
    ///
    /// - Parameter template: the path to make, ending in `XXXXXX`, which become random characters.
    /// - Returns: the directory made.
    /// - Throws: ``SystemError`` from `mkdtemp`, naming `template` (`EINVAL`: it does not end
    ///   in `XXXXXX`).
    package static func makeUniqueDirectory(template: String) throws(SystemError) -> String {
        var characters = Array(template.utf8CString)
        let made = characters.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        guard made != nil else { throw SystemError("mkdtemp", path: template) }
        return String(decoding: characters.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Removes an empty directory, or a cgroup with no process in it (`rmdir`).
    ///
    /// - Parameter path: the directory.
    /// - Throws: ``SystemError`` from `rmdir` (`ENOENT`: it is gone already; `EBUSY`: a cgroup
    ///   the kernel still holds; `ENOTEMPTY`: something is in it).
    package static func removeDirectory(_ path: String) throws(SystemError) {
        try Syscall.retrying("rmdir", path: path) { rmdir(path) }
    }

    /// Removes a name that is not a directory (`unlink`): a file, a socket, a symbolic link
    /// itself (never what it names).
    ///
    /// - Parameter path: the name.
    /// - Throws: ``SystemError`` from `unlink` (`ENOENT`: it is gone already).
    package static func removeFile(_ path: String) throws(SystemError) {
        try Syscall.retrying("unlink", path: path) { unlink(path) }
    }

    /// Renames `source` to `destination` in one step (`rename`): whoever opens `destination`
    /// finds the old file or the new one, never neither, never half of one.
    ///
    /// - Parameters:
    ///   - source: the name it has.
    ///   - destination: the name it gets; what was there is replaced.
    /// - Throws: ``SystemError`` from `rename`, naming `destination`.
    package static func rename(_ source: String, to destination: String) throws(SystemError) {
        try Syscall.retrying("rename", path: destination) { Glibc.rename(source, destination) }
    }

    /// Sets a file's permissions exactly, whatever the umask (`chmod`; a symbolic link is followed).
    ///
    /// - Parameters:
    ///   - path: the file.
    ///   - mode: the permission bits, such as `0o600`.
    /// - Throws: ``SystemError`` from `chmod`.
    package static func changeMode(_ path: String, to mode: UInt32) throws(SystemError) {
        try Syscall.retrying("chmod", path: path) { chmod(path, mode_t(mode)) }
    }

    /// Whether something exists at `path` (`access(F_OK)`; a symbolic link is followed, so a
    /// dangling one does not count).
    package static func exists(_ path: String) -> Bool {
        access(path, F_OK) == 0
    }

    /// Whether this process may write to `path` (`access(W_OK)`: judged for the real uid and
    /// gid, as `access` does, which for memwarn's tools are the effective ones).
    package static func isWritable(_ path: String) -> Bool {
        access(path, W_OK) == 0
    }

    /// Whether this process may execute `path` (`access(X_OK)`, judged as ``isWritable(_:)``).
    /// A directory may be "executed" too (searched): see ``ExecutablePath/isExecutableFile(_:)``.
    package static func isExecutable(_ path: String) -> Bool {
        access(path, X_OK) == 0
    }
}

#if canImport(Glibc)
import Glibc
#endif

extension FileSystem {
    /// Writes `bytes` as the whole of the file at `path`, replacing what is there in one step and
    /// never writing through a symbolic link.
    ///
    /// The bytes go to a new file beside it, made with a random name, `O_EXCL` and `O_NOFOLLOW`
    /// (so nothing planted under a name anyone could guess is ever opened), which is then renamed
    /// over `path`: a reader finds the old file or the new one, never half of one, and a symbolic
    /// link at `path` is replaced itself, what it names left untouched. The directory is held open
    /// throughout, so the new file and the rename are in the same one. A failure leaves no
    /// temporary file behind.
    ///
    /// - Parameters:
    ///   - path: the file to write (its directory must exist).
    ///   - bytes: its whole content.
    ///   - mode: the new file's permissions, less the umask (as `open` applies them).
    /// - Throws: ``SystemError`` from opening the directory (naming it), or from `openat`, `write`,
    ///   `close` or `renameat` (naming `path`); `EISDIR` when `path` names no file (it ends in `/`).
    package static func replaceFile(_ path: String, with bytes: some Collection<UInt8>, mode: UInt32 = 0o644) throws(SystemError) {
        let slash = path.lastIndex(of: "/")
        let name = String(slash.map { path[path.index(after: $0)...] } ?? path[...])
        guard !name.isEmpty, name != ".", name != ".." else { throw SystemError("open", errno: EISDIR, path: path) }
        let directory = slash.map { $0 == path.startIndex ? "/" : String(path[..<$0]) } ?? "."
        let folder = try FileDescriptor.open(directory, O_RDONLY | O_DIRECTORY)
        var attempts = 0
        while true {
            let temporary = "\(name).\(String(UInt32.random(in: 0...UInt32.max), radix: 16)).tmp"
            let file: FileDescriptor
            do {
                file = try folder.openEntry(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, mode: mode)
            } catch  where error.errno == EEXIST && attempts < 100 {
                attempts += 1
                continue
            } catch {
                throw SystemError(error.call, errno: error.errno, path: path)
            }
            do {
                try file.writeAll(bytes)
                try file.close()
                try folder.renameEntry(temporary, to: name)
            } catch {
                try? folder.removeEntry(temporary)
                throw SystemError(error.call, errno: error.errno, path: path)
            }
            return
        }
    }
}

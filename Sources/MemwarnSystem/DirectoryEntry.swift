#if canImport(Glibc)
import Glibc
#endif

/// A name in a directory, as reading the directory gives it (`readdir`).
package struct DirectoryEntry: Sendable, Hashable {
    /// The name, without the directory.
    package var name: String
    /// Its kind, as the directory records it (`d_type`), links not followed; `nil` when the file
    /// system does not record kinds (`DT_UNKNOWN`): ask ``FileStatus`` then.
    package var type: FileType?
}

extension FileSystem {
    /// The entries of a directory, without `.` and `..`, in the order the directory holds them
    /// (`opendir`, `readdir`, `closedir`).
    ///
    /// - Parameter path: the directory (a symbolic link to one is followed).
    /// - Returns: the entries.
    /// - Throws: ``SystemError`` from `opendir` (`ENOENT`, `ENOTDIR`, `EACCES`) or `readdir`,
    ///   naming `path`.
    package static func entries(of path: String) throws(SystemError) -> [DirectoryEntry] {
        guard let stream = opendir(path) else { throw SystemError("opendir", path: path) }
        defer { closedir(stream) }
        var entries: [DirectoryEntry] = []
        while true {
            errno = 0
            guard let entry = readdir(stream) else {
                // The end, unless readdir set errno.
                if errno != 0 { throw SystemError("readdir", path: path) }
                return entries
            }
            let (name, recorded) = Self.nameAndType(of: entry)
            guard name != "." && name != ".." else { continue }
            entries.append(DirectoryEntry(name: name, type: Self.type(recorded: recorded)))
        }
    }

    /// The name and `d_type` of the record `readdir` returned, read in place. A record is only as
    /// long as its name (`d_reclen`), not `sizeof(struct dirent)`: copying the struct, or its
    /// 256-byte `d_name`, reads past the record, and past the end of glibc's buffer for the last
    /// record of a page — a fault, seen once in `memwarn soak` listing a control directory.
    private static func nameAndType(of entry: UnsafeMutablePointer<dirent>) -> (name: String, type: UInt8) {
        let record = UnsafeRawPointer(entry)
        let name = String(cString: (record + MemoryLayout<dirent>.offset(of: \.d_name)!).assumingMemoryBound(to: CChar.self))
        let type = record.load(fromByteOffset: MemoryLayout<dirent>.offset(of: \.d_type)!, as: UInt8.self)
        return (name, type)
    }

    /// The kind a `d_type` records, or `nil` for `DT_UNKNOWN`.
    private static func type(recorded: UInt8) -> FileType? {
        switch Int(recorded) {
        case Int(DT_UNKNOWN): nil
        case Int(DT_REG): .regular
        case Int(DT_DIR): .directory
        case Int(DT_LNK): .symbolicLink
        case Int(DT_SOCK): .socket
        case Int(DT_FIFO): .fifo
        default: .other
        }
    }
}

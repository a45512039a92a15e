import MemwarnSystem

#if canImport(Glibc)
import Glibc
#endif

/// A fresh directory under `/tmp`, removed with its files by `remove()`.
package struct ScratchDirectory {
    package let path: String

    package init() {
        do {
            path = try FileSystem.makeUniqueDirectory(template: "/tmp/memwarn-media-XXXXXX")
        } catch {
            preconditionFailure("\(error)")
        }
    }

    package func file(_ name: String) -> String { path + "/" + name }

    /// Writes raw bytes to a file in the directory and returns its path.
    @discardableResult
    package func write(_ name: String, _ bytes: [UInt8]) -> String {
        let target = file(name)
        do {
            try FileDescriptor.open(target, O_WRONLY | O_CREAT | O_TRUNC, mode: 0o644).writeAll(bytes)
        } catch {
            preconditionFailure("cannot write \(target): \(error)")
        }
        return target
    }

    /// Writes a header given as text followed by raw raster bytes.
    @discardableResult
    package func write(_ name: String, header: String, raster: [UInt8]) -> String {
        write(name, Array(header.utf8) + raster)
    }

    package func remove() {
        guard let directory = opendir(path) else { return }
        while let entry = readdir(directory) {
            // Read in place: a record is only as long as its name (see `FileSystem.entries(of:)`).
            let name = String(cString: (UnsafeRawPointer(entry) + MemoryLayout<dirent>.offset(of: \.d_name)!).assumingMemoryBound(to: CChar.self))
            if name != "." && name != ".." { unlink(file(name)) }
        }
        closedir(directory)
        rmdir(path)
    }
}

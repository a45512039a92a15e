#if canImport(Glibc)
import Glibc
#endif

/// A fresh directory under `/tmp`, removed with its files by `remove()`.
struct ScratchDirectory {
    let path: String

    init() {
        var template = Array("/tmp/memwarn-media-XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        precondition(made != nil, "mkdtemp failed: \(String(cString: strerror(errno)))")
        path = String(cString: made!)
    }

    func file(_ name: String) -> String { path + "/" + name }

    /// Writes raw bytes to a file in the directory and returns its path.
    @discardableResult
    func write(_ name: String, _ bytes: [UInt8]) -> String {
        let target = file(name)
        let fd = open(target, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        precondition(fd >= 0, "cannot create \(target)")
        let written = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        precondition(written == bytes.count, "short write to \(target)")
        close(fd)
        return target
    }

    /// Writes a header given as text followed by raw raster bytes.
    @discardableResult
    func write(_ name: String, header: String, raster: [UInt8]) -> String {
        write(name, Array(header.utf8) + raster)
    }

    func remove() {
        guard let directory = opendir(path) else { return }
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
            if name != "." && name != ".." { unlink(file(name)) }
        }
        closedir(directory)
        rmdir(path)
    }
}

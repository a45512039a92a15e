#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Whole-file binary reads and writes for media, with `EINTR` and short transfers handled.
enum MediaFile {
    /// Reads a whole file.
    ///
    /// - Complexity: O(n) in the file's size.
    /// - Throws: ``MediaError`` `.unreadable`, with the `errno`.
    static func read(_ path: String) throws(MediaError) -> [UInt8] {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw failure(.unreadable, "cannot open", path) }
        defer { close(fd) }
        var info = stat()
        let expected = fstat(fd, &info) == 0 && info.st_size > 0 ? Int(info.st_size) : 0
        var bytes: [UInt8] = []
        bytes.reserveCapacity(expected)
        var chunk = [UInt8](repeating: 0, count: max(64 * 1024, min(expected + 1, 4 << 20)))
        while true {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw failure(.unreadable, "read failed", path)
            }
            if count == 0 { return bytes }
            bytes.append(contentsOf: chunk[0..<count])
        }
    }

    /// Creates or truncates a file and writes bytes to it.
    ///
    /// - Complexity: O(n).
    /// - Throws: ``MediaError`` `.unwritable`, with the `errno`.
    static func write(_ bytes: [UInt8], to path: String) throws(MediaError) {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw failure(.unwritable, "cannot create", path) }
        var written = 0
        while written < bytes.count {
            let count = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + written, $0.count - written) }
            if count < 0 {
                if errno == EINTR { continue }
                let error = failure(.unwritable, "write failed", path)
                close(fd)
                throw error
            }
            written += count
        }
        guard close(fd) == 0 else { throw failure(.unwritable, "close failed", path) }
    }

    private static func failure(_ code: MediaError.Code, _ what: String, _ path: String) -> MediaError {
        let error = errno
        return MediaError(code, "\(what): \(String(cString: strerror(error)))", path: path, errno: error)
    }
}

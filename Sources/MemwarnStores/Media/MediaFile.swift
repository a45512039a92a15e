import MemwarnSystem

#if canImport(Glibc)
import Glibc
#endif

/// Whole-file binary reads and writes for media, with `EINTR` and short transfers handled.
enum MediaFile {
    /// Reads a whole file.
    ///
    /// - Complexity: O(n) in the file's size.
    /// - Throws: ``MediaError`` `.unreadable`, with the `errno`.
    static func read(_ path: String) throws(MediaError) -> [UInt8] {
        do {
            return try FileDescriptor.open(path, O_RDONLY).readToEnd()
        } catch {
            throw failure(.unreadable, error.call == "open" ? "cannot open" : "read failed", error, path)
        }
    }

    /// Creates or truncates a file and writes bytes to it.
    ///
    /// - Complexity: O(n).
    /// - Throws: ``MediaError`` `.unwritable`, with the `errno`.
    static func write(_ bytes: [UInt8], to path: String) throws(MediaError) {
        do throws(SystemError) {
            let file = try FileDescriptor.open(path, O_WRONLY | O_CREAT | O_TRUNC, mode: 0o644)
            try file.writeAll(bytes)
            try file.close()
        } catch {
            let what =
                switch error.call {
                case "open": "cannot create"
                case "close": "close failed"
                default: "write failed"
                }
            throw failure(.unwritable, what, error, path)
        }
    }

    private static func failure(_ code: MediaError.Code, _ what: String, _ error: SystemError, _ path: String) -> MediaError {
        MediaError(code, "\(what): \(error.reason)", path: path, errno: error.errno)
    }
}

import MemwarnSystem

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Reads and writes kernel files (procfs, cgroupfs) below a root directory.
///
/// The root is `/` on a real host. Tests point it at a directory of captured files (a
/// "fixture tree" laid out like `/proc` and `/sys/fs/cgroup`), so every parser and every
/// discovery rule runs on the same code path as in production.
package struct KernelFiles: Sendable, Hashable {
    /// The directory that stands for `/`.
    package var root: String

    /// Failures to force on reads, for tests (``ReadFaultPlan``); `nil`, as on the real host,
    /// leaves every read to the kernel. Copies share the plan, and compare equal only with it.
    package var faultPlan: ReadFaultPlan?

    /// The largest kernel file memwarn reads. `memory.stat` is about 1.5 KiB and
    /// `mountinfo` a few KiB on busy hosts; anything bigger is not a kernel file of ours.
    package static let maximumFileSize = 1 << 20

    /// The real host.
    package static let host = KernelFiles(root: "/")

    /// Files below `root`.
    ///
    /// - Parameter root: the directory that stands for `/`; a trailing `/` is dropped.
    package init(root: String) {
        self.root = root.hasSuffix("/") && root != "/" ? String(root.dropLast()) : root
    }

    /// The real path of an absolute host path.
    ///
    /// - Parameter hostPath: an absolute path as on the host.
    /// - Returns: the path below ``root``; `hostPath` itself on the real host.
    package func path(_ hostPath: String) -> String {
        root == "/" ? hostPath : root + hostPath
    }

    /// Whether a file or directory exists at the host path.
    ///
    /// - Parameter hostPath: an absolute path as on the host.
    /// - Returns: whether something exists there.
    package func exists(_ hostPath: String) -> Bool {
        FileSystem.exists(path(hostPath))
    }

    /// Whether a path names a directory (symbolic links followed).
    ///
    /// - Parameter hostPath: an absolute path as on the host.
    /// - Returns: whether it names a directory.
    package func isDirectory(_ hostPath: String) -> Bool {
        FileType.at(path(hostPath)) == .directory
    }

    /// Reads a whole file as text.
    ///
    /// - Parameter hostPath: an absolute path as on the host, such as `/proc/self/cgroup`.
    /// - Returns: the file's text.
    /// - Throws: `CgroupError` `.notFound` when it does not exist, `.unreadable` when it
    ///   cannot be read, `.malformed` when it is larger than ``maximumFileSize`` or not UTF-8.
    package func read(_ hostPath: String) throws(CgroupError) -> String {
        let realPath = path(hostPath)
        let bytes: [UInt8]
        do throws(SystemError) {
            try faultPlan?.check(.open, of: hostPath, at: realPath)
            let file = try FileDescriptor.open(realPath, O_RDONLY)
            try faultPlan?.check(.read, of: hostPath, at: realPath)
            bytes = try file.readToEnd(limit: Self.maximumFileSize)
        } catch  where error.call == "open" {
            throw Self.openError(error.errno, realPath, writing: false)
        } catch  where error.errno == EFBIG {
            throw CgroupError(.malformed, "larger than \(Self.maximumFileSize) bytes; not a kernel file memwarn knows", path: realPath)
        } catch {
            let code: CgroupError.Code = (error.errno == ENODEV || error.errno == ENOENT) ? .notFound : .unreadable
            throw CgroupError(code, "read failed: \(error.reason)", path: realPath, errno: error.errno)
        }
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw CgroupError(.malformed, "not UTF-8 text", path: realPath)
        }
        return text
    }

    /// Writes text to an existing control file in one `write`, retried on `EINTR`.
    ///
    /// Control files are never created: a missing file is `.notFound`.
    ///
    /// - Parameters:
    ///   - text: what to write, such as `"1"` or `"max"`.
    ///   - hostPath: the control file, an absolute path as on the host.
    /// - Throws: `CgroupError` `.notFound`, `.permissionDenied` or `.unwritable`.
    package func write(_ text: String, to hostPath: String) throws(CgroupError) {
        let realPath = path(hostPath)
        do throws(SystemError) {
            let file = try FileDescriptor.open(realPath, O_WRONLY)
            try file.writeWhole(Array(text.utf8))
        } catch  where error.call == "open" {
            throw Self.openError(error.errno, realPath, writing: true)
        } catch {
            throw CgroupError(.unwritable, "writing \"\(text)\" failed: \(error.reason)", path: realPath, errno: error.errno)
        }
    }

    /// The names in a directory, without `.` and `..`.
    ///
    /// - Parameter hostPath: the directory, an absolute path as on the host.
    /// - Returns: the names, sorted.
    /// - Throws: `CgroupError` `.notFound`, `.permissionDenied` or `.unreadable` when the
    ///   directory cannot be opened.
    package func list(_ hostPath: String) throws(CgroupError) -> [String] {
        let realPath = path(hostPath)
        do {
            return try FileSystem.entries(of: realPath).map(\.name).sorted()
        } catch {
            throw Self.openError(error.errno, realPath, writing: false)
        }
    }

    /// The error for a failed `open`, by errno: `.notFound`, `.permissionDenied`, or `.unreadable`/`.unwritable`.
    ///
    /// - Parameters:
    ///   - error: the `errno` of the failed `open`.
    ///   - path: the path that was opened.
    ///   - writing: whether it was opened for writing (`.unwritable`, else `.unreadable`).
    ///   - file: where it is thrown; the default is the caller's.
    ///   - line: where it is thrown; the default is the caller's.
    /// - Returns: the error, naming `path` and carrying `error`.
    package static func openError(_ error: Int32, _ path: String, writing: Bool, file: String = #fileID, line: Int = #line) -> CgroupError {
        let reason = String(cString: strerror(error))
        switch error {
        case ENOENT, ENOTDIR, ENODEV: return CgroupError(.notFound, "does not exist (\(reason))", path: path, errno: error, file: file, line: line)
        case EACCES, EPERM: return CgroupError(.permissionDenied, "permission denied", path: path, errno: error, file: file, line: line)
        default: return CgroupError(writing ? .unwritable : .unreadable, "cannot open: \(reason)", path: path, errno: error, file: file, line: line)
        }
    }
}

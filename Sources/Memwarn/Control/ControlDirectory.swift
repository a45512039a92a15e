#if canImport(Glibc)
import Glibc
#endif

/// The per-user directory where control endpoints put their sockets, one `<pid>.sock` a
/// process.
///
/// The default is `$XDG_RUNTIME_DIR/memwarn` when `XDG_RUNTIME_DIR` is set, else
/// `/run/user/<euid>/memwarn` when `/run/user/<euid>` exists, else for root `/run/memwarn`, else
/// `/tmp/memwarn-<euid>`. A client (``check(_:)``) and an endpoint (when it prepares the
/// directory) both refuse a directory in a folder another user owns or may change (a sticky
/// one, as `/tmp`, is fine).
/// An endpoint creates the directory with mode 0700 and refuses one that is a symbolic link,
/// is owned by another user or is writable by others (there is no fallback: the error says why).
public enum ControlDirectory {
    /// The default directory, from this process's environment and effective uid.
    public static var defaultPath: String {
        let uid = geteuid()
        if let runtime = getenv("XDG_RUNTIME_DIR").map({ String(cString: $0) }), !runtime.isEmpty {
            return runtime + "/memwarn"
        }
        var status = stat()
        if stat("/run/user/\(uid)", &status) == 0, status.st_mode & S_IFMT == S_IFDIR {
            return "/run/user/\(uid)/memwarn"
        }
        // Root's must not be in /tmp, where any user could make it first.
        if uid == 0, stat("/run", &status) == 0, status.st_mode & S_IFMT == S_IFDIR, status.st_uid == 0 {
            return "/run/memwarn"
        }
        return "/tmp/memwarn-\(uid)"
    }

    /// The socket of process `pid` in `directory`.
    ///
    /// - Parameters:
    ///   - pid: the process that serves the socket.
    ///   - directory: the control directory, such as ``defaultPath``.
    /// - Returns: the socket's path, `<directory>/<pid>.sock`.
    public static func socketPath(for pid: Int32, in directory: String) -> String {
        directory + "/\(pid).sock"
    }

    /// The pid a socket path names (`…/1234.sock` is 1234), or `nil` for another name.
    ///
    /// - Parameter path: a socket's path, as ``socketPath(for:in:)`` makes it.
    /// - Returns: the pid, or `nil` when the name is not a positive pid followed by `.sock`.
    public static func pid(ofSocket path: String) -> Int32? {
        let name = path.split(separator: "/").last ?? ""
        guard name.hasSuffix(".sock") else { return nil }
        return Int32(name.dropLast(".sock".count)).flatMap { $0 > 0 ? $0 : nil }
    }

    /// Checks, for a client, that the directory and every folder above it can be trusted (as
    /// an endpoint does when it prepares the directory): a directory another user made or can
    /// change could hold their sockets. A directory that does not exist is no error (there is
    /// nothing in it to trust).
    ///
    /// - Parameter directory: the control directory, such as ``defaultPath``.
    /// - Throws: ``ControlError`` naming what is wrong.
    public static func check(_ directory: String) throws(ControlError) {
        var status = stat()
        guard lstat(directory, &status) == 0 else { return }
        do {
            try PrivateDirectory.check(directory, purpose: "the control directory")
        } catch {
            throw ControlError(error.message)
        }
    }

    /// Creates the directory with mode 0700, or checks the one that exists: it must be a
    /// directory, not a symbolic link, owned by the effective uid, and not writable by others.
    ///
    /// - Throws: ``ControlError`` naming the directory and what is wrong with it.
    static func prepare(_ directory: String) throws(ControlError) {
        do {
            try PrivateDirectory.prepare(directory, purpose: "the control directory")
        } catch {
            throw ControlError(error.message)
        }
    }
}

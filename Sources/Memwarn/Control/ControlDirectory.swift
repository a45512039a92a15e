#if canImport(Glibc)
import Glibc
#endif

/// The per-user directory where control endpoints put their sockets, one `<pid>.sock` a
/// process.
///
/// The default is `$XDG_RUNTIME_DIR/memwarn` when `XDG_RUNTIME_DIR` is set, else
/// `/run/user/<euid>/memwarn` when `/run/user/<euid>` exists, else `/tmp/memwarn-<euid>`.
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
        return "/tmp/memwarn-\(uid)"
    }

    /// The socket of process `pid` in `directory`.
    public static func socketPath(for pid: Int32, in directory: String) -> String {
        directory + "/\(pid).sock"
    }

    /// The pid a socket path names (`…/1234.sock` is 1234), or `nil` for another name.
    public static func pid(ofSocket path: String) -> Int32? {
        let name = path.split(separator: "/").last ?? ""
        guard name.hasSuffix(".sock") else { return nil }
        return Int32(name.dropLast(".sock".count)).flatMap { $0 > 0 ? $0 : nil }
    }

    /// Creates the directory with mode 0700, or checks the one that exists: it must be a
    /// directory, not a symbolic link, owned by the effective uid, and not writable by others.
    ///
    /// - Throws: ``ControlError`` naming the directory and what is wrong with it.
    static func prepare(_ directory: String) throws(ControlError) {
        if mkdir(directory, 0o700) == 0 {
            // mkdir applies the umask; the mode is exactly 0700 whatever it is.
            guard chmod(directory, 0o700) == 0 else { throw .system("chmod", directory) }
        } else if errno != EEXIST {
            throw .system("cannot create the control directory", directory)
        }
        var status = stat()
        guard lstat(directory, &status) == 0 else { throw .system("lstat", directory) }
        switch status.st_mode & S_IFMT {
        case S_IFDIR: break
        case S_IFLNK: throw ControlError("the control directory \(directory) is a symbolic link; refusing to use it")
        default: throw ControlError("the control directory \(directory) exists and is not a directory")
        }
        guard status.st_uid == geteuid() else {
            throw ControlError("the control directory \(directory) is owned by uid \(status.st_uid), not by this process's uid \(geteuid()); refusing to use it")
        }
        // Another user who may write there could replace our socket with one of theirs.
        guard status.st_mode & 0o022 == 0 else {
            throw ControlError("the control directory \(directory) is writable by other users (mode \(String(status.st_mode & 0o7777, radix: 8))); refusing to use it")
        }
    }
}

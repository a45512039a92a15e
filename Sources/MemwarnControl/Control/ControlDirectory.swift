import CgroupKit
import MemwarnSystem

#if canImport(Glibc)
import Glibc
#endif

/// The per-user directory where control endpoints put their sockets, one `<pid>.sock` a
/// process.
///
/// The default is `$XDG_RUNTIME_DIR/memwarn` when `XDG_RUNTIME_DIR` is set, else
/// `/run/user/<euid>/memwarn` when `/run/user/<euid>` exists, else for root `/run/memwarn`, else
/// `/tmp/memwarn-<euid>` — and when another user made that one first (anyone may make names in
/// `/tmp`), `/tmp/memwarn-<euid>.XXXXXX`, made by the endpoint with an unguessable name and found
/// by clients by its owner (``searchPaths``). A client (``check(_:)``) and an endpoint (when it prepares the
/// directory) both refuse a directory in a folder another user owns or may change (a sticky
/// one, as `/tmp`, is fine).
/// An endpoint creates the directory with mode 0700 and refuses one that is a symbolic link,
/// is owned by another user or is writable by others (there is no fallback: the error says why).
package enum ControlDirectory {
    /// The default directory, from this process's environment and effective uid.
    package static var defaultPath: String {
        let uid = geteuid()
        if let runtime = getenv("XDG_RUNTIME_DIR").map({ String(cString: $0) }), !runtime.isEmpty {
            return runtime + "/memwarn"
        }
        if FileType.at("/run/user/\(uid)") == .directory {
            return "/run/user/\(uid)/memwarn"
        }
        // Root's must not be in /tmp, where any user could make it first.
        if uid == 0, let run = try? FileStatus.at("/run"), run.type == .directory, run.owner == 0 {
            return "/run/memwarn"
        }
        return temporaryPath(uid: uid)
    }

    /// `/tmp/memwarn-<uid>`: the default of an account with no runtime directory (a service
    /// account's, often).
    static func temporaryPath(uid: uid_t) -> String { "/tmp/memwarn-\(uid)" }

    /// Whether `path` is there but is not a directory this user owns: another user made it
    /// first (anyone may create names in `/tmp`), or put something else there.
    static func isTakenByAnother(_ path: String, uid: uid_t = geteuid()) -> Bool {
        guard let status = try? FileStatus.at(path, followingLinks: false) else { return false }
        return status.type != .directory || status.owner != uid
    }

    /// This user's own `/tmp/memwarn-<uid>.XXXXXX` directories (owned by the user, mode 0700,
    /// not symbolic links), by name: where endpoints go when `/tmp/memwarn-<uid>` was taken by
    /// another user first.
    static func ownAlternates(uid: uid_t = geteuid()) -> [String] {
        let prefix = "memwarn-\(uid)."
        return names(in: "/tmp").filter { $0.hasPrefix(prefix) && $0.count > prefix.count }.map { "/tmp/" + $0 }.filter { path in
            guard let status = try? FileStatus.at(path, followingLinks: false) else { return false }
            return status.type == .directory && status.owner == uid && status.permissions & 0o077 == 0
        }
    }

    /// The directories where this user's endpoints may be: ``defaultPath``, or — where that is
    /// `/tmp/memwarn-<uid>` and another user made it first — this user's own
    /// `/tmp/memwarn-<uid>.XXXXXX` ones (the squatted one alone when there are none yet, so
    /// that ``check(_:)`` says what is wrong with it).
    package static var searchPaths: [String] {
        let path = defaultPath
        let uid = geteuid()
        guard path == temporaryPath(uid: uid) else { return [path] }
        let own = ownAlternates(uid: uid)
        if isTakenByAnother(path, uid: uid) { return own.isEmpty ? [path] : own }
        return [path] + own
    }

    /// The directory an endpoint serves in: ``defaultPath``; where that is `/tmp/memwarn-<uid>`
    /// and another user made it first, this user's first `/tmp/memwarn-<uid>.XXXXXX`, made with
    /// an unguessable name (`mkdtemp`) when there is none — a name made in advance by another
    /// user cannot stop the endpoint.
    ///
    /// - Returns: the directory, and why it is not the default when it is not (for the log).
    /// - Throws: `ControlError` when a directory cannot be made.
    static func endpointPath() throws(ControlError) -> (path: String, note: String?) {
        let path = defaultPath
        let uid = geteuid()
        guard path == temporaryPath(uid: uid), isTakenByAnother(path, uid: uid) else { return (path, nil) }
        let owner = (try? FileStatus.at(path, followingLinks: false))?.owner ?? 0
        let note = "\(path) was made by uid \(owner), not this user (\(uid))"
        if let existing = ownAlternates(uid: uid).first { return (existing, note) }
        do {
            return (try FileSystem.makeUniqueDirectory(template: "\(path).XXXXXX"), note)
        } catch {
            throw ControlError(.systemCallFailed, "\(note), and mkdtemp \(path).XXXXXX failed: \(error.reason)", errno: error.errno)
        }
    }

    /// For root: every user's control directories by the names endpoints make them —
    /// `/run/memwarn`, `/run/user/<uid>/memwarn`, `/tmp/memwarn-<uid>` and
    /// `/tmp/memwarn-<uid>.XXXXXX` — each only when it is a directory owned by that uid (root for
    /// `/run/memwarn`); for anyone else ``searchPaths``.
    package static var everyUsersPaths: [String] {
        guard geteuid() == 0 else { return searchPaths }
        var paths = searchPaths
        func add(_ path: String, owner: uid_t, privateOnly: Bool = false) {
            guard !paths.contains(path), let status = try? FileStatus.at(path, followingLinks: false), status.type == .directory, status.owner == owner,
                !privateOnly || status.permissions & 0o077 == 0
            else { return }
            paths.append(path)
        }
        add("/run/memwarn", owner: 0)
        for name in names(in: "/run/user") { if let uid = uid_t(name) { add("/run/user/\(uid)/memwarn", owner: uid) } }
        for name in names(in: "/tmp") where name.hasPrefix("memwarn-") {
            let rest = name.dropFirst("memwarn-".count)
            let uidText = rest.prefix { $0 != "." }
            guard let uid = uid_t(uidText) else { continue }
            // An alternate (`memwarn-<uid>.XXXXXX`) only as ``ownAlternates(uid:)`` takes it: private.
            add("/tmp/" + name, owner: uid, privateOnly: uidText.count != rest.count)
        }
        return paths
    }

    private static func names(in folder: String) -> [String] {
        (try? KernelFiles.host.list(folder)) ?? []
    }

    /// The socket of process `pid` in `directory`.
    ///
    /// - Parameters:
    ///   - pid: the process that serves the socket.
    ///   - directory: the control directory, such as ``defaultPath``.
    /// - Returns: the socket's path, `<directory>/<pid>.sock`.
    package static func socketPath(for pid: Int32, in directory: String) -> String {
        directory + "/\(pid).sock"
    }

    /// The pid a socket path names (`…/1234.sock` is 1234), or `nil` for another name.
    ///
    /// - Parameter path: a socket's path, as ``socketPath(for:in:)`` makes it.
    /// - Returns: the pid, or `nil` when the name is not a positive pid followed by `.sock`.
    package static func pid(ofSocket path: String) -> Int32? {
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
    /// - Throws: `ControlError` naming what is wrong.
    package static func check(_ directory: String) throws(ControlError) {
        guard (try? FileStatus.at(directory, followingLinks: false)) != nil else { return }
        do {
            try PrivateDirectory.check(directory, purpose: "the control directory")
        } catch {
            throw ControlError(error.errno == nil ? .untrusted : .systemCallFailed, error.message, errno: error.errno)
        }
    }

    /// Creates the directory with mode 0700, or checks the one that exists: it must be a
    /// directory, not a symbolic link, owned by the effective uid, and not writable by others.
    ///
    /// - Throws: `ControlError` naming the directory and what is wrong with it; when another
    ///   user's file or folder is in the way, ``takenMessage(_:_:uid:)``.
    static func prepare(_ directory: String) throws(ControlError) {
        do {
            try PrivateDirectory.prepare(directory, purpose: "the control directory")
        } catch {
            if let foreign = error.foreign { throw ControlError(.untrusted, takenMessage(directory, foreign)) }
            throw ControlError(error.errno == nil ? .untrusted : .systemCallFailed, error.message, errno: error.errno)
        }
    }

    /// What an endpoint says when another user's file or folder is where its directory should
    /// be: that user made it first, which anyone can do where the folder above lets other users
    /// make names (a pod's directory on a node whose `/run/memwarn/pods` was made 1777). One
    /// line: the path, its owner, such a folder with its mode, and what to do.
    static func takenMessage(_ directory: String, _ foreign: PrivateDirectory.Foreign, uid: uid_t = geteuid()) -> String {
        let refusal: String
        let removal: String
        if foreign.path == directory {
            let kind =
                switch foreign.type {
                case .directory: ""
                case .symbolicLink: " (a symbolic link)"
                default: " (not a directory)"
                }
            var made = "uid \(foreign.owner) made it\(kind) before this process did"
            if let folder = sharedFolder(of: directory) {
                made += ", in \(folder.path), where other users may make names (mode \(String(folder.permissions, radix: 8)))"
            }
            refusal = "the control directory \(directory) is owned by uid \(foreign.owner), not by this process's uid \(uid): \(made); refusing to use it."
            removal = "Remove it as root"
        } else {
            refusal =
                "the control directory \(directory) lies in \(foreign.path), owned by uid \(foreign.owner), neither root nor this process's uid \(uid): "
                + "that user made it, or took it, before this process; refusing to use it."
            removal = "Remove \(foreign.path) as root"
        }
        return "\(refusal) \(removal), and have the control directory made for uid \(uid) before the service starts, in a folder only root may write "
            + "(on Kubernetes: /run/memwarn/pods root's, mode 0755, and pod.yaml's init container; see Examples/kubernetes/README.md)"
    }

    /// What an endpoint that started says when its directory lies in a folder where other users
    /// may make names (sticky, as `/tmp`: one they may write without the sticky bit is refused
    /// outright): it is this user's now, but another could have made it first, and the endpoint
    /// would not have started. `nil` for any other folder, and for `/tmp/memwarn-<uid>` and its
    /// alternates, whose squatting ``endpointPath()`` answers.
    static func exposureWarning(for directory: String, uid: uid_t = geteuid()) -> String? {
        let temporary = temporaryPath(uid: uid)
        guard directory != temporary, !directory.hasPrefix(temporary + "."), let folder = sharedFolder(of: directory) else { return nil }
        return "the control directory \(directory) lies in \(folder.path), where other users may make names "
            + "(mode \(String(folder.permissions, radix: 8))): another user could have made it before this process, and the endpoint would not have started. "
            + "Make \(folder.path) writable by root alone, and the control directory for uid \(uid) before the service starts "
            + "(on Kubernetes: /run/memwarn/pods root's, mode 0755, and pod.yaml's init container; see Examples/kubernetes/README.md)"
    }

    /// The folder that holds `directory`, with its permission bits, when users other than its
    /// owner may make names in it (writable by group or others); `nil` otherwise, or when it
    /// cannot be read.
    static func sharedFolder(of directory: String) -> (path: String, permissions: UInt32)? {
        let trimmed = directory.count > 1 && directory.hasSuffix("/") ? String(directory.dropLast()) : directory
        guard let slash = trimmed.lastIndex(of: "/") else { return nil }
        let folder = slash == trimmed.startIndex ? "/" : String(trimmed[..<slash])
        guard let status = try? FileStatus.at(folder), status.permissions & 0o022 != 0 else { return nil }
        return (folder, status.permissions)
    }
}

import CLinuxCalls

#if canImport(Glibc)
import Glibc
#endif

/// A directory only this process's user can write to: what memwarn's tools write files into,
/// so nothing is ever written through a path another user could have prepared (a symbolic
/// link planted under a predictable name in `/tmp`, say).
package enum PrivateDirectory {
    /// Why a directory cannot be used.
    package struct Refusal: Error, Sendable, CustomStringConvertible {
        package var message: String
        /// The `errno` of the system call that failed, when one did (else the directory is not
        /// trusted).
        package var errno: Int32?
        /// What another user put in the way, when that is why: the path itself (a directory of
        /// theirs, a symbolic link, a file) or a folder above it of theirs. With it the caller
        /// can say whose it is and what to do.
        package var foreign: Foreign? = nil
        package var description: String { message }
    }

    /// A file or folder another user owns where ``prepare(_:purpose:)`` wanted its own: made
    /// before this process made it, or put there instead.
    package struct Foreign: Sendable, Hashable {
        /// Its path: the directory asked for, or a folder above it.
        package var path: String
        /// The uid that owns it.
        package var owner: UInt32
        /// What it is (a symbolic link is not followed).
        package var type: FileType
    }

    /// Creates `path` with mode 0700, or checks the one that exists: it must be a directory,
    /// not a symbolic link, owned by the effective uid, and not writable by group or others.
    ///
    /// - Parameter purpose: names the directory in errors ("the control directory").
    /// - Throws: ``Refusal`` naming the directory and what is wrong with it.
    package static func prepare(_ path: String, purpose: String) throws(Refusal) {
        try checkAncestors(of: path, purpose: purpose)
        let made: Bool
        do {
            try FileSystem.makeDirectory(path, mode: 0o700)
            made = true
        } catch {
            guard error.errno == EEXIST else { throw system("cannot create \(purpose)", path, errno: error.errno) }
            made = false
        }
        if made {
            // mkdir applies the umask; the mode is exactly 0700 whatever it is.
            do {
                try FileSystem.changeMode(path, to: 0o700)
            } catch {
                throw system("chmod", path, errno: error.errno)
            }
        }
        try checkOwnership(of: path, purpose: purpose)
    }

    /// Checks a directory that must already exist, as ``prepare(_:purpose:)`` does, without
    /// making it: it and every folder above it.
    ///
    /// A directory of root's is trusted as well as one of ours (root may do anything anyway).
    package static func check(_ path: String, purpose: String) throws(Refusal) {
        try checkAncestors(of: path, purpose: purpose)
        try checkOwnership(of: path, purpose: purpose, trustingRoot: true)
    }

    /// Every folder above `path` (symbolic links resolved) must be root's or ours, and one that
    /// others may write to must be sticky (as `/tmp` is): otherwise another user could rename
    /// the directory away and put their own in its place.
    private static func checkAncestors(of path: String, purpose: String) throws(Refusal) {
        let parent = path.hasSuffix("/") ? String(path.dropLast()) : path
        guard let slash = parent.lastIndex(of: "/") else { return }
        let above = slash == parent.startIndex ? "/" : String(parent[..<slash])
        guard let resolved = realpath(above, nil) else { return }  // missing: mkdir will say so
        defer { free(resolved) }
        var folder = String(cString: resolved)
        while true {
            let status: FileStatus
            do {
                status = try FileStatus.at(folder)
            } catch {
                throw system("stat", folder, errno: error.errno)
            }
            if status.owner != 0 && status.owner != geteuid() {
                throw Refusal(
                    message: "\(purpose) \(path) lies in \(folder), owned by uid \(status.owner) (neither root nor this user); refusing to use it",
                    foreign: Foreign(path: folder, owner: status.owner, type: status.type))
            }
            if status.permissions & 0o022 != 0 && !status.isSticky {
                throw Refusal(
                    message:
                        "\(purpose) \(path) lies in \(folder), which other users may write to (mode \(String(status.permissions, radix: 8)), not sticky); refusing to use it"
                )
            }
            if folder == "/" { return }
            folder = folder.lastIndex(of: "/").map { $0 == folder.startIndex ? "/" : String(folder[..<$0]) } ?? "/"
        }
    }

    private static func checkOwnership(of path: String, purpose: String, trustingRoot: Bool = false) throws(Refusal) {
        let status: FileStatus
        do {
            status = try FileStatus.at(path, followingLinks: false)
        } catch {
            throw system("lstat", path, errno: error.errno)
        }
        let foreign = status.owner == geteuid() ? nil : Foreign(path: path, owner: status.owner, type: status.type)
        switch status.type {
        case .directory: break
        case .symbolicLink: throw Refusal(message: "\(purpose) \(path) is a symbolic link; refusing to use it", foreign: foreign)
        default: throw Refusal(message: "\(purpose) \(path) exists and is not a directory", foreign: foreign)
        }
        guard status.owner == geteuid() || (trustingRoot && status.owner == 0) else {
            throw Refusal(
                message: "\(purpose) \(path) is owned by uid \(status.owner), not by this process's uid \(geteuid()); refusing to use it", foreign: foreign)
        }
        // Another user who may write there could replace what we put in it.
        guard status.permissions & 0o022 == 0 else {
            throw Refusal(message: "\(purpose) \(path) is writable by other users (mode \(String(status.permissions, radix: 8))); refusing to use it")
        }
    }

    /// Makes a fresh directory, mode 0700, under `$TMPDIR` (or `/tmp`) named `<prefix>-XXXXXX`
    /// with a random suffix (`mkdtemp`): it did not exist before, so nobody prepared it.
    package static func makeTemporary(prefix: String) throws(Refusal) -> String {
        let base = getenv("TMPDIR").map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
        do {
            return try FileSystem.makeUniqueDirectory(template: "\(base.hasSuffix("/") ? String(base.dropLast()) : base)/\(prefix)-XXXXXX")
        } catch {
            throw system("mkdtemp", "\(base)/\(prefix)-XXXXXX", errno: error.errno)
        }
    }

    private static func system(_ call: String, _ path: String, errno code: Int32) -> Refusal {
        Refusal(message: "\(call) \(path): \(String(cString: strerror(code)))", errno: code)
    }
}

#if canImport(Glibc)
import Glibc
#endif

/// An exclusive `flock(2)` on a directory, held for as long as the value lives: a proof that
/// whoever took it still runs which holds in every PID namespace (a pid does not: it names
/// another process, or none, on the other side of a namespace). The kernel drops the lock when
/// its holder's descriptor closes, however the holder ended — a `SIGKILL` included.
package final class DirectoryLock: Sendable {
    /// The directory's descriptor (close-on-exec: a command the holder starts does not keep it).
    private let descriptor: Int32
    /// The directory locked.
    package let path: String

    /// Takes the lock on `path`.
    ///
    /// - Throws: ``SystemError`` from `open` or `flock` (`EWOULDBLOCK`: another holds it).
    package init(holding path: String) throws(SystemError) {
        let descriptor = try Syscall.retrying("open", path: path) { open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
        guard Self.tryLock(descriptor) else {
            let error = SystemError("flock", path: path)
            close(descriptor)
            throw error
        }
        self.descriptor = descriptor
        self.path = path
    }

    deinit { close(descriptor) }

    private static func tryLock(_ descriptor: Int32) -> Bool {
        while flock(descriptor, LOCK_EX | LOCK_NB) != 0 {
            guard errno == EINTR else { return false }
        }
        return true
    }
}

import CLinuxCalls

#if canImport(Glibc)
import Glibc
#endif

/// An open file descriptor that is owned: closed exactly once, when its owner lets go of it.
///
/// It cannot be copied, so two owners can never close one descriptor (or one close a number the
/// kernel has since handed out again). ``close()`` closes it and reports a failure; dropping it
/// closes it too, ignoring the result (Linux releases the descriptor even when `close` fails).
/// ``rawValue`` lends the number to a call; ``take()`` hands ownership to code that will close it
/// itself (a child's standard stream after `dup2`).
package struct FileDescriptor: ~Copyable {
    /// The descriptor's number, for a call that borrows it.
    package let rawValue: Int32

    /// Takes ownership of `rawValue`, an open descriptor nobody else will close.
    package init(adopting rawValue: Int32) {
        self.rawValue = rawValue
    }

    deinit {
        _ = Glibc.close(rawValue)
    }

    /// Closes the descriptor.
    ///
    /// - Throws: ``SystemError`` for `close`'s `EIO` (a write that never reached the disk);
    ///   the descriptor is released either way.
    package consuming func close() throws(SystemError) {
        let descriptor = rawValue
        discard self
        // Not retried on EINTR: Linux has released the number by then, and it may be reused.
        guard Glibc.close(descriptor) == 0 || errno == EINTR else { throw SystemError("close") }
    }

    /// Gives up ownership without closing: the caller closes the number.
    package consuming func take() -> Int32 {
        let descriptor = rawValue
        discard self
        return descriptor
    }

    /// Opens a file (`O_CLOEXEC` is always added).
    ///
    /// - Parameters:
    ///   - path: the file.
    ///   - flags: `O_RDONLY`, `O_WRONLY`, `O_RDWR`, with `O_NONBLOCK`, `O_CREAT`… as `open(2)` takes them.
    ///   - mode: the permissions of a file `O_CREAT` makes.
    /// - Returns: the open descriptor.
    /// - Throws: ``SystemError`` from `open`, naming `path`.
    package static func open(_ path: String, _ flags: Int32, mode: UInt32 = 0) throws(SystemError) -> FileDescriptor {
        FileDescriptor(adopting: try Syscall.retrying("open", path: path) { Glibc.open(path, flags | O_CLOEXEC, mode_t(mode)) })
    }

    /// A new eventfd with a counter of 0 (`EFD_CLOEXEC`; `EFD_NONBLOCK` unless `blocking`).
    ///
    /// - Throws: ``SystemError`` from `eventfd`.
    package static func eventCounter(blocking: Bool = false) throws(SystemError) -> FileDescriptor {
        let flags = Int32(EFD_CLOEXEC) | (blocking ? 0 : Int32(EFD_NONBLOCK))
        return FileDescriptor(adopting: try Syscall.retrying("eventfd") { eventfd(0, flags) })
    }

    /// Reads an eventfd's counter and resets it to 0.
    ///
    /// - Returns: the counter, or 0 when it was 0 (a non-blocking eventfd would block).
    /// - Throws: ``SystemError`` from `read`.
    package borrowing func readCounter() throws(SystemError) -> UInt64 {
        var count: UInt64 = 0
        let read = try Syscall.nonBlocking("read(eventfd)") { Glibc.read(rawValue, &count, 8) }
        return read == 8 ? count : 0
    }

    /// Adds one to an eventfd's counter (wakes whoever waits on it).
    ///
    /// - Throws: ``SystemError`` from `write`; never for a full counter of a non-blocking eventfd.
    package borrowing func signalCounter() throws(SystemError) {
        var one: UInt64 = 1
        _ = try Syscall.nonBlocking("write(eventfd)") { Glibc.write(rawValue, &one, 8) }
    }
}

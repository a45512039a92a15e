#if canImport(Glibc)
import Glibc
#endif

extension FileDescriptor {
    /// Reads what is there, up to `buffer.count` bytes.
    ///
    /// - Returns: the bytes read; 0 at the end of the file; `nil` when a non-blocking
    ///   descriptor has nothing yet.
    /// - Throws: ``SystemError`` from `read`.
    package borrowing func read(into buffer: UnsafeMutableRawBufferPointer) throws(SystemError) -> Int? {
        try Syscall.nonBlocking("read") { Glibc.read(rawValue, buffer.baseAddress, buffer.count) }
    }

    /// Reads up to `buffer.count` bytes from `offset` without moving the file position
    /// (`pread`): a kernel file such as `memory.current` is generated anew by a read at offset 0,
    /// so one open descriptor serves every reading.
    ///
    /// - Returns: the bytes read (0 at the end of the file).
    /// - Throws: ``SystemError`` from `pread` (`ENODEV` for a cgroup file whose cgroup was removed).
    package borrowing func read(into buffer: UnsafeMutableRawBufferPointer, atOffset offset: Int) throws(SystemError) -> Int {
        try Syscall.retrying("pread") { Glibc.pread(rawValue, buffer.baseAddress, buffer.count, off_t(offset)) }
    }

    /// Reads what is there into `chunk`'s storage (its count is the most read).
    ///
    /// - Returns: the bytes read, at the start of `chunk`; 0 at the end of the file; `nil` when
    ///   a non-blocking descriptor has nothing yet.
    /// - Throws: ``SystemError`` from `read`.
    package borrowing func read(into chunk: inout [UInt8]) throws(SystemError) -> Int? {
        try chunk.withUnsafeMutableBytes { buffer in Result { () throws(SystemError) in try read(into: buffer) } }.get()
    }

    /// Reads to the end of the file, in chunks sized from the file's size (`fstat`) where it
    /// tells one (a regular file), so a large file takes few reads and one allocation.
    ///
    /// - Parameter limit: the most bytes to read; more is an error.
    /// - Returns: the bytes.
    /// - Throws: ``SystemError`` from `read` (`EFBIG` when the file is larger than `limit`,
    ///   `EAGAIN` when a non-blocking descriptor runs dry).
    package borrowing func readToEnd(limit: Int = .max) throws(SystemError) -> [UInt8] {
        let size = (try? status())?.size ?? 0
        let expected = size > 0 ? min(Int(size), limit) : 0
        var bytes: [UInt8] = []
        bytes.reserveCapacity(expected)
        var chunk = [UInt8](repeating: 0, count: max(8192, min(expected + 1, 4 << 20)))
        while true {
            guard let count = try read(into: &chunk) else {
                throw SystemError("read", errno: EAGAIN)
            }
            if count == 0 { return bytes }
            bytes.append(contentsOf: chunk[0..<count])
            if bytes.count > limit { throw SystemError("read", errno: EFBIG) }
        }
    }

    /// Writes what it can of `bytes`.
    ///
    /// - Returns: the bytes written, or `nil` when a non-blocking descriptor has no room.
    /// - Throws: ``SystemError`` from `write`.
    package borrowing func write(_ bytes: UnsafeRawBufferPointer) throws(SystemError) -> Int? {
        try Syscall.nonBlocking("write") { Glibc.write(rawValue, bytes.baseAddress, bytes.count) }
    }

    /// Writes all of `bytes` (a blocking descriptor), in as many calls as it takes.
    ///
    /// - Throws: ``SystemError`` from `write` (`EAGAIN` when a non-blocking one runs out of room).
    package borrowing func writeAll(_ bytes: some Collection<UInt8>) throws(SystemError) {
        let bytes = Array(bytes)
        var offset = 0
        while offset < bytes.count {
            let written = try bytes.withUnsafeBytes { buffer in
                Result { () throws(SystemError) in try write(UnsafeRawBufferPointer(rebasing: buffer[offset...])) }
            }.get()
            guard let written else { throw SystemError("write", errno: EAGAIN) }
            offset += written
        }
    }

    /// Writes `bytes` in one `write` (a kernel control file takes a value whole or not at all).
    ///
    /// - Throws: ``SystemError`` from `write`; `EIO` when the kernel took only part of it.
    package borrowing func writeWhole(_ bytes: [UInt8]) throws(SystemError) {
        let written = try bytes.withUnsafeBytes { buffer in Result { () throws(SystemError) in try write(buffer) } }.get()
        guard written == bytes.count else { throw SystemError("write", errno: written == nil ? EAGAIN : EIO) }
    }

    /// Waits until the descriptor is ready for `events` (readable by default: data, or its
    /// writer closed it), or reports an error or hang-up.
    ///
    /// - Parameters:
    ///   - events: what to wait for, as epoll names it (`poll` shares the values).
    ///   - timeout: how long at most; `nil` waits for ever, `.zero` only looks.
    /// - Returns: whether it became ready in time.
    /// - Throws: ``SystemError`` from `poll`.
    package borrowing func waitUntilReady(for events: EpollEvents = .readable, timeout: Duration?) throws(SystemError) -> Bool {
        let deadline = timeout.map { ContinuousClock.now + $0 }
        while true {
            var entry = pollfd(fd: rawValue, events: Int16(truncatingIfNeeded: events.rawValue), revents: 0)
            let milliseconds = deadline.map { Int32(clamping: max(0, ($0 - .now).roundedUpMilliseconds)) } ?? -1
            let ready = poll(&entry, 1, milliseconds)
            if ready > 0 { return true }
            if ready == 0 { return false }
            guard errno == EINTR else { throw SystemError("poll") }
        }
    }
}

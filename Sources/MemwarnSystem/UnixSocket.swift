import CLinuxCalls

#if canImport(Glibc)
import Glibc
#endif

/// A filesystem Unix socket address (`sockaddr_un`), for `bind` and `connect`.
package struct UnixSocketAddress: Sendable {
    /// The socket's path.
    package let path: String
    private var storage = sockaddr_un()

    /// The longest path a socket address holds: 107 bytes.
    package static let maximumPathBytes = MemoryLayout.size(ofValue: sockaddr_un().sun_path) - 1

    /// - Throws: ``SystemError`` `ENAMETOOLONG` when the path does not fit `sun_path`
    ///   (``maximumPathBytes``), `EINVAL` when it is empty.
    package init(path: String) throws(SystemError) {
        let bytes = Array(path.utf8)
        guard !bytes.isEmpty else { throw SystemError("sockaddr_un", errno: EINVAL, path: path) }
        guard bytes.count <= Self.maximumPathBytes else { throw SystemError("sockaddr_un", errno: ENAMETOOLONG, path: path) }
        self.path = path
        storage.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &storage.sun_path) { $0.copyBytes(from: bytes) }
    }

    /// Calls `body` with the address as `bind` and `connect` take it.
    func withSocketAddress<T>(_ body: (UnsafePointer<sockaddr>, socklen_t) -> T) -> T {
        withUnsafePointer(to: storage) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
    }
}

/// Who is at the other end of a Unix socket, as the kernel recorded it at connect (`SO_PEERCRED`).
package struct PeerCredentials: Sendable, Hashable {
    package var pid: Int32
    package var uid: UInt32
    package var gid: UInt32
}

extension FileDescriptor {
    /// A new Unix stream socket (`SOCK_CLOEXEC`; `SOCK_NONBLOCK` when `nonBlocking`).
    ///
    /// - Throws: ``SystemError`` from `socket`.
    package static func unixStreamSocket(nonBlocking: Bool) throws(SystemError) -> FileDescriptor {
        let type = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | (nonBlocking ? Int32(SOCK_NONBLOCK.rawValue) : 0)
        return FileDescriptor(adopting: try Syscall.retrying("socket") { socket(AF_UNIX, type, 0) })
    }

    /// Binds the socket to `address`.
    ///
    /// - Throws: ``SystemError`` from `bind` (`EADDRINUSE` when a file is there).
    package borrowing func bind(to address: UnixSocketAddress) throws(SystemError) {
        try Syscall.retrying("bind", path: address.path) { address.withSocketAddress { Glibc.bind(rawValue, $0, $1) } }
    }

    /// Listens for connections.
    ///
    /// - Throws: ``SystemError`` from `listen`.
    package borrowing func listen(backlog: Int32) throws(SystemError) {
        try Syscall.retrying("listen") { Glibc.listen(rawValue, backlog) }
    }

    /// Accepts a waiting connection as a non-blocking, close-on-exec descriptor (`accept4`).
    ///
    /// - Returns: the connection, or `nil` when none waits.
    /// - Throws: ``SystemError`` from `accept4` (`EMFILE` when out of descriptors).
    package borrowing func acceptConnection() throws(SystemError) -> FileDescriptor? {
        while true {
            do {
                guard let connection = try Syscall.nonBlocking("accept4", { memwarn_accept_nonblocking(rawValue) }) else { return nil }
                return FileDescriptor(adopting: connection)
            } catch  where error.errno == ECONNABORTED {
                continue  // the client left before it was accepted: take the next one
            }
        }
    }

    /// Connects the socket to `address`.
    ///
    /// - Throws: ``SystemError`` from `connect` (`ECONNREFUSED` when nothing listens there).
    package borrowing func connect(to address: UnixSocketAddress) throws(SystemError) {
        // Not retried on EINTR: the connection goes on in the background then (EALREADY).
        guard address.withSocketAddress({ Glibc.connect(rawValue, $0, $1) }) == 0 else {
            throw SystemError("connect", path: address.path)
        }
    }

    /// Makes reads and writes on the descriptor return at once when they would wait
    /// (`O_NONBLOCK`), after a connect that was allowed to wait.
    ///
    /// - Throws: ``SystemError`` from `fcntl`.
    package borrowing func makeNonBlocking() throws(SystemError) {
        let flags = try Syscall.retrying("fcntl(F_GETFL)") { fcntl(rawValue, F_GETFL) }
        try Syscall.retrying("fcntl(F_SETFL)") { fcntl(rawValue, F_SETFL, flags | O_NONBLOCK) }
    }

    /// The peer's credentials (`SO_PEERCRED`).
    ///
    /// - Throws: ``SystemError`` from `getsockopt`.
    package borrowing func peerCredentials() throws(SystemError) -> PeerCredentials {
        var credentials = PeerCredentials(pid: 0, uid: 0, gid: 0)
        try Syscall.retrying("getsockopt(SO_PEERCRED)") {
            memwarn_peer_credentials(rawValue, &credentials.pid, &credentials.uid, &credentials.gid)
        }
        return credentials
    }

    /// Sends what it can of `bytes`, never raising `SIGPIPE` (`MSG_NOSIGNAL`).
    ///
    /// - Returns: the bytes sent, or `nil` when there is no room now (non-blocking) or the send
    ///   timed out (`SO_SNDTIMEO`).
    /// - Throws: ``SystemError`` from `send` (`EPIPE`, `ECONNRESET` when the peer is gone).
    package borrowing func send(_ bytes: UnsafeRawBufferPointer) throws(SystemError) -> Int? {
        try Syscall.nonBlocking("send") { Glibc.send(rawValue, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL)) }
    }

    /// Receives what is there, up to `buffer.count` bytes.
    ///
    /// - Returns: the bytes received; 0 when the peer closed its side; `nil` when nothing is
    ///   there now (non-blocking) or the receive timed out (`SO_RCVTIMEO`).
    /// - Throws: ``SystemError`` from `recv`.
    package borrowing func receive(into buffer: UnsafeMutableRawBufferPointer) throws(SystemError) -> Int? {
        try Syscall.nonBlocking("recv") { recv(rawValue, buffer.baseAddress, buffer.count, 0) }
    }

    /// Sends what it can of `bytes` (``send(_:)-(UnsafeRawBufferPointer)`` for an array's bytes).
    package borrowing func send(_ bytes: ArraySlice<UInt8>) throws(SystemError) -> Int? {
        try bytes.withUnsafeBytes { buffer in Result { () throws(SystemError) in try send(buffer) } }.get()
    }

    /// Receives what is there into `chunk`'s storage (its count is the most received).
    ///
    /// - Returns: the bytes received, at the start of `chunk`; 0 when the peer closed its side;
    ///   `nil` when nothing is there now or the receive timed out.
    package borrowing func receive(into chunk: inout [UInt8]) throws(SystemError) -> Int? {
        try chunk.withUnsafeMutableBytes { buffer in Result { () throws(SystemError) in try receive(into: buffer) } }.get()
    }

    /// Bounds every blocking send and receive on the socket (`SO_SNDTIMEO`, `SO_RCVTIMEO`).
    ///
    /// - Throws: ``SystemError`` from `setsockopt`.
    package borrowing func setTimeouts(_ timeout: Duration) throws(SystemError) {
        let microseconds = max(1, timeout.microseconds)
        var limit = timeval(tv_sec: Int(microseconds / 1_000_000), tv_usec: Int(microseconds % 1_000_000))
        for (option, name) in [(SO_RCVTIMEO, "setsockopt(SO_RCVTIMEO)"), (SO_SNDTIMEO, "setsockopt(SO_SNDTIMEO)")] {
            try Syscall.retrying(name) { setsockopt(rawValue, SOL_SOCKET, option, &limit, socklen_t(MemoryLayout<timeval>.size)) }
        }
    }
}

package import MemwarnSystem

#if canImport(Glibc)
import Glibc
#endif

/// The client side of the control endpoints: finding them, pruning stale sockets, and one
/// request-reply exchange (`memwarn trigger` uses it).
///
/// ```swift
/// let directory = ControlDirectory.defaultPath
/// ControlClient.pruneStaleSockets(in: directory)
/// for path in ControlClient.socketPaths(in: directory) {
///     let reply = try ControlClient.send(.warn(level: .warning), to: path)
/// }
/// ```
package enum ControlClient {
    /// The longest reply read.
    static let maximumReplyBytes = 16 << 20

    /// The `<pid>.sock` sockets in `directory`, by increasing pid; empty when it does not exist.
    package static func socketPaths(in directory: String) -> [String] {
        guard let entries = try? FileSystem.entries(of: directory) else { return [] }
        var found: [(pid: Int32, path: String)] = []
        for entry in entries {
            let path = directory + "/" + entry.name
            guard let pid = ControlDirectory.pid(ofSocket: path), FileType.at(path, followingLinks: false) == .socket else { continue }
            found.append((pid, path))
        }
        return found.sorted { $0.pid < $1.pid }.map(\.path)
    }

    /// Removes stale sockets: those of processes that no longer exist, and those nothing
    /// listens on any more (a connection is refused) — a pid may have been reused by a process
    /// with no endpoint. Only sockets owned by this process's user are removed.
    ///
    /// - Returns: the paths removed.
    @discardableResult
    package static func pruneStaleSockets(in directory: String) -> [String] {
        socketPaths(in: directory).filter { path in
            guard let pid = ControlDirectory.pid(ofSocket: path), (try? FileStatus.at(path, followingLinks: false))?.owner == geteuid() else { return false }
            guard !Signals.processExists(pid) || nothingListens(on: path) else { return false }
            return (try? FileSystem.removeFile(path)) != nil
        }
    }

    /// Removes the socket a process that has ended left behind (killed before its monitor
    /// could remove it): in this user's control directories, and for root in every user's (a
    /// command may switch to a service account: `setpriv`, `runuser`), a socket owned by the
    /// directory's owner. `memwarn run` and `memwarn soak` call it for the commands they waited for.
    ///
    /// - Returns: whether a socket was removed.
    @discardableResult
    package static func removeSocket(ofEnded pid: Int32, in directories: [String] = ControlDirectory.everyUsersPaths) -> Bool {
        guard !Signals.processExists(pid) else { return false }
        var removed = false
        for directory in directories {
            // The directory held open without following a link, and the socket looked at and
            // removed relative to it: a directory swapped for a symbolic link meanwhile cannot
            // send the unlink elsewhere.
            let folder: FileDescriptor
            do {
                folder = try FileDescriptor.open(directory, O_RDONLY | O_DIRECTORY | O_NOFOLLOW)
            } catch {
                continue
            }
            let name = "\(pid).sock"
            guard let owner = try? folder.status(), let socket = try? folder.status(ofEntry: name, followingLinks: false),
                socket.type == .socket, socket.owner == owner.owner, socket.owner == geteuid() || geteuid() == 0,
                nothingListens(on: ControlDirectory.socketPath(for: pid, in: directory))  // another PID namespace's live one
            else { continue }
            if (try? folder.removeEntry(name)) != nil { removed = true }
        }
        return removed
    }

    /// Whether connecting to a socket is refused (nobody listens on it).
    static func nothingListens(on path: String) -> Bool {
        do {
            let address = try UnixSocketAddress(path: path)
            let socket = try FileDescriptor.unixStreamSocket(nonBlocking: true)
            try socket.connect(to: address)
            return false
        } catch {
            return error.errno == ECONNREFUSED
        }
    }

    /// Sends a request and reads the reply.
    ///
    /// - Throws: `ControlError` when the exchange fails or the reply is unreadable; a
    ///   refusal or failure reported by the endpoint is a `failure(_:)` reply.
    package static func send(_ request: ControlRequest, to socketPath: String, timeout: Duration = .seconds(10)) throws(ControlError) -> ControlReply {
        try ControlReply(line: Array(exchange(request.line, with: socketPath, timeout: timeout).utf8))
    }

    /// Sends one line (a newline is added) and returns the reply line, without its newline.
    ///
    /// - Parameter timeout: the bound on each step: connecting, sending, every read.
    /// - Throws: `ControlError` when nothing listens on the socket, the exchange times out,
    ///   or the endpoint closes without a reply.
    package static func exchange(_ line: String, with socketPath: String, timeout: Duration = .seconds(10)) throws(ControlError) -> String {
        try exchange(line, with: socketPath, timeout: timeout) { (peer) throws(ControlError) in
            // Only an endpoint of this user's, or root's, is believed.
            guard peer.uid == geteuid() || peer.uid == 0 else {
                throw ControlError(
                    .untrusted, "the endpoint on \(socketPath) runs as uid \(peer.uid), neither this user (uid \(geteuid())) nor root; not trusted")
            }
        }.reply
    }

    /// Sends one line once `admit` accepted the endpoint's peer credentials (`SO_PEERCRED`: the
    /// process that listens, whatever the socket's name says), and returns the reply line with
    /// those credentials.
    ///
    /// - Throws: `ControlError` when the exchange fails, or what `admit` throws.
    package static func exchange(
        _ line: String, with socketPath: String, timeout: Duration,
        admit: (PeerCredentials) throws(ControlError) -> Void
    ) throws(ControlError) -> (reply: String, peer: PeerCredentials) {
        let socket = try connect(to: socketPath, timeout: timeout)
        let peer: PeerCredentials
        do {
            peer = try socket.peerCredentials()
        } catch {
            throw ControlError(.untrusted, "the credentials of the endpoint on \(socketPath) could not be read: \(error.reason)")
        }
        try admit(peer)
        try sendAll(Array((line + "\n").utf8), on: socket, socketPath: socketPath)
        return (try receiveLine(on: socket, socketPath: socketPath, timeout: timeout), peer)
    }

    /// A blocking socket connected to `socketPath`, every send and receive bounded by `timeout`.
    private static func connect(to socketPath: String, timeout: Duration) throws(ControlError) -> FileDescriptor {
        do throws(SystemError) {
            let address = try UnixSocketAddress(path: socketPath)
            let socket = try FileDescriptor.unixStreamSocket(nonBlocking: false)
            try socket.setTimeouts(timeout)
            try socket.connect(to: address)
            return socket
        } catch  where error.errno == ECONNREFUSED {
            throw ControlError(.noEndpoint, "nothing listens on \(socketPath) (a stale socket)", errno: ECONNREFUSED)
        } catch  where error.errno == ENAMETOOLONG {
            throw ControlError(.pathTooLong, "the socket path \(socketPath) is longer than \(UnixSocketAddress.maximumPathBytes) bytes")
        } catch  where error.errno == ENOENT {
            throw ControlError(.noEndpoint, error.description, errno: ENOENT)  // the socket is gone: the service ended
        } catch {
            throw ControlError(error)
        }
    }

    /// Sends everything, unless the endpoint closed its side: its reply (a refusal) may wait to be read.
    private static func sendAll(_ bytes: [UInt8], on socket: borrowing FileDescriptor, socketPath: String) throws(ControlError) {
        var offset = 0
        while offset < bytes.count {
            let sent: Int?
            do {
                sent = try socket.send(bytes[offset...])
            } catch  where error.errno == EPIPE || error.errno == ECONNRESET {
                return
            } catch {
                throw ControlError(error)
            }
            guard let sent else { throw ControlError(.timedOut, "timed out sending to \(socketPath)") }
            offset += sent
        }
    }

    /// Reads up to the first newline: each chunk is searched once (never the whole reply again),
    /// and the whole reply must come within `timeout`, not only each read.
    private static func receiveLine(on socket: borrowing FileDescriptor, socketPath: String, timeout: Duration) throws(ControlError) -> String {
        var received: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        let deadline = ContinuousClock.now + timeout
        while true {
            guard ContinuousClock.now < deadline else { throw ControlError(.timedOut, "no complete reply from \(socketPath) within \(timeout)") }
            guard let count = try receiveChunk(on: socket, into: &chunk) else {
                throw ControlError(.timedOut, "no reply from \(socketPath) within \(timeout)")
            }
            if let line = try appendReply(chunk[0..<count], to: &received, socketPath: socketPath) { return line }
        }
    }

    /// One read of a reply: the bytes read, 0 when the endpoint closed (a reset counts as
    /// closed), `nil` when nothing more is there yet (or the read timed out).
    static func receiveChunk(on socket: borrowing FileDescriptor, into chunk: inout [UInt8]) throws(ControlError) -> Int? {
        do {
            return try socket.receive(into: &chunk)
        } catch  where error.errno == ECONNRESET {
            return 0
        } catch {
            throw ControlError(error)
        }
    }

    /// Adds one read to a reply (an empty one: the endpoint closed). Each chunk is searched once,
    /// never the whole reply again.
    ///
    /// - Returns: the complete line (without its newline) once it is there, or `nil` to read on.
    /// - Throws: `ControlError` when the endpoint closed without a reply, or the reply is longer
    ///   than `limit` (``maximumReplyBytes`` by default).
    static func appendReply(
        _ chunk: ArraySlice<UInt8>, to received: inout [UInt8], socketPath: String, limit: Int = maximumReplyBytes
    ) throws(ControlError) -> String? {
        if chunk.isEmpty {
            guard received.isEmpty else { return String(decoding: received, as: UTF8.self) }
            throw ControlError(.connectionClosed, "the endpoint on \(socketPath) closed the connection without a reply")
        }
        if let newline = chunk.firstIndex(of: UInt8(ascii: "\n")) {
            received += chunk[..<newline]
            return String(decoding: received, as: UTF8.self)
        }
        guard received.count + chunk.count <= limit else {
            throw ControlError(.malformedReply, "the reply from \(socketPath) is longer than \(limit) bytes")
        }
        received += chunk
        return nil
    }
}

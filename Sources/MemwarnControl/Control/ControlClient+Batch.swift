package import MemwarnSystem

#if canImport(Glibc)
import Glibc
#endif

/// One request to many endpoints at once, for a node agent: whatever the endpoints do, the
/// exchange with all of them costs at most one timeout.
///
/// Every connect is made without waiting: a listener whose backlog is full (it accepts nothing)
/// fails at once instead of holding the caller for the timeout. Every request is sent, then the
/// replies are awaited together, with one `poll`, until one deadline: a hung endpoint costs its
/// timeout once for the whole batch, not once each (40 such sockets cost 250 ms, not 10 s).
extension ControlClient {
    /// What one endpoint of a batch gave: its reply line and peer, or why not.
    package typealias BatchOutcome = Result<(reply: String, peer: PeerCredentials), ControlError>

    /// Sends `line` to every socket and reads each reply.
    ///
    /// - Parameters:
    ///   - line: the request (a newline is added).
    ///   - socketPaths: the endpoints.
    ///   - timeout: the bound on the whole batch.
    ///   - admit: judges each endpoint's peer (`SO_PEERCRED`) before the request is sent to it.
    /// - Returns: each socket's outcome, by path.
    package static func exchangeEach(
        _ line: String, with socketPaths: [String], timeout: Duration,
        admit: (String, PeerCredentials) throws(ControlError) -> Void
    ) -> [String: BatchOutcome] {
        var outcomes: [String: BatchOutcome] = [:]
        let deadline = ContinuousClock.now + timeout
        var pending: [PendingReply] = []
        let request = Array((line + "\n").utf8)
        for path in Set(socketPaths).sorted() {
            do {
                let connection = try PendingReply(connectingTo: path)
                try admit(path, connection.peer)
                try connection.send(request)
                pending.append(connection)
            } catch {
                outcomes[path] = .failure(error)
            }
        }
        while pending.contains(where: { $0.outcome == nil }) {
            let left = deadline - .now
            guard left > .zero else { break }
            let waiting = pending.filter { $0.outcome == nil }
            let ready: [Int]
            do {
                ready = try ReadinessPoll.readable(waiting.map { $0.socket.rawValue }, timeout: left)
            } catch {
                break  // what is still open times out below
            }
            for index in ready {
                let connection = waiting[index]
                connection.receive()
                if let outcome = connection.outcome { outcomes[connection.path] = outcome }
            }
        }
        for connection in pending where connection.outcome == nil {
            outcomes[connection.path] = .failure(ControlError(.timedOut, "no complete reply from \(connection.path) within \(timeout)"))
        }
        return outcomes
    }
}

/// One endpoint of a batch: connected without waiting, its request sent, its reply collected as
/// it comes.
private final class PendingReply {
    let path: String
    let socket: FileDescriptor
    let peer: PeerCredentials
    private var received: [UInt8] = []
    private(set) var outcome: ControlClient.BatchOutcome?

    init(connectingTo path: String) throws(ControlError) {
        self.path = path
        do throws(SystemError) {
            let address = try UnixSocketAddress(path: path)
            socket = try FileDescriptor.unixStreamSocket(nonBlocking: true)
            try socket.connect(to: address)
        } catch  where error.errno == EAGAIN {
            throw ControlError(.timedOut, "\(path): its listener accepts no connection (its backlog is full)", errno: EAGAIN)
        } catch  where error.errno == ECONNREFUSED {
            throw ControlError(.noEndpoint, "nothing listens on \(path) (a stale socket)", errno: ECONNREFUSED)
        } catch  where error.errno == ENOENT {
            throw ControlError(.noEndpoint, error.description, errno: ENOENT)
        } catch  where error.errno == ENAMETOOLONG {
            throw ControlError(.pathTooLong, "the socket path \(path) is longer than \(UnixSocketAddress.maximumPathBytes) bytes")
        } catch {
            throw ControlError(error)
        }
        do {
            peer = try socket.peerCredentials()
        } catch {
            throw ControlError(.untrusted, "the credentials of the endpoint on \(path) could not be read: \(error.reason)")
        }
    }

    /// Sends the request whole: a request is a short line, which a fresh connection's buffer
    /// takes at once; one it does not take is a failure, not a wait.
    func send(_ bytes: [UInt8]) throws(ControlError) {
        let sent: Int?
        do {
            sent = try socket.send(bytes[...])
        } catch  where error.errno == EPIPE || error.errno == ECONNRESET {
            return  // the endpoint closed its side: its reply (a refusal) may wait to be read
        } catch {
            throw ControlError(error)
        }
        guard sent == bytes.count else { throw ControlError(.timedOut, "\(path) did not take the request at once") }
    }

    /// Reads what is there; sets ``outcome`` once the line is complete, or the endpoint closed or
    /// failed.
    func receive() {
        var chunk = [UInt8](repeating: 0, count: 4096)
        while outcome == nil {
            do {
                guard let count = try ControlClient.receiveChunk(on: socket, into: &chunk) else { return }  // nothing more yet
                if let line = try ControlClient.appendReply(chunk[0..<count], to: &received, socketPath: path) { outcome = .success((line, peer)) }
            } catch {
                outcome = .failure(error)
            }
        }
    }
}

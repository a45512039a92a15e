package import MemwarnSystem

#if canImport(Glibc)
import Glibc
#endif

/// One request and its reply with a control endpoint, on an ``EventLoop`` and never blocking it:
/// the connect does not wait (a listener whose backlog is full fails at once), the listener's
/// credentials (`SO_PEERCRED`) are judged before anything is sent, and the reply is read as the
/// socket becomes readable, into a buffer of at most `maximumReplyBytes`, until a deadline. A
/// peer that answers slowly, hugely or never costs its own descriptor and its own bytes, until its
/// own deadline: nothing else waits for it. A node agent keeps hundreds of these under way.
///
/// Confined to its loop's thread: made there, its completion runs there.
package final class ControlExchange {
    /// The reply line (without its newline) and the listener's credentials, or why not.
    package typealias Outcome = Result<(reply: String, peer: PeerCredentials), ControlError>

    /// The longest reply a node agent reads: a summary status or report is a few hundred bytes
    /// (`line(summary:)`); an endpoint that sends more is not one to believe.
    package static let summaryReplyLimit = 64 << 10

    /// The socket asked.
    package let socketPath: String
    /// The listener, as the kernel names it.
    package let peer: PeerCredentials
    private let loop: EventLoop
    private let socket: FileDescriptor
    private let maximumReplyBytes: Int
    private let timeout: Duration
    private var registration: EventLoop.Registration?
    private var deadline: EventLoop.Deadline?
    private var received: [UInt8] = []
    private var completion: ((Outcome) -> Void)?

    /// Connects to `socketPath` without waiting, hands the listener's credentials to `admit`,
    /// sends `line` (a newline is added) and waits for the reply on `loop`.
    ///
    /// - Parameters:
    ///   - line: the request.
    ///   - socketPath: the endpoint.
    ///   - loop: the loop the reply is read on; the caller is on its thread.
    ///   - timeout: the bound on the whole exchange, from now.
    ///   - maximumReplyBytes: the longest reply read; a longer one fails the exchange.
    ///   - admit: judges the listener before the request is sent (throw to refuse it).
    ///   - completion: called once on the loop's thread with the outcome, unless the exchange is
    ///     cancelled first; never from this initializer.
    /// - Throws: `ControlError` when the exchange ends at once: nothing listens, the backlog is
    ///   full, `admit` refused the listener, the request could not be sent, or the loop cannot
    ///   watch the socket.
    package init(
        _ line: String, with socketPath: String, on loop: EventLoop, timeout: Duration, maximumReplyBytes: Int = summaryReplyLimit,
        admit: (PeerCredentials) throws(ControlError) -> Void, completion: @escaping (Outcome) -> Void
    ) throws(ControlError) {
        loop.preconditionOnLoop()
        self.socketPath = socketPath
        self.loop = loop
        self.maximumReplyBytes = maximumReplyBytes
        self.timeout = timeout
        socket = try Self.connect(to: socketPath)
        do {
            peer = try socket.peerCredentials()
        } catch {
            throw ControlError(.untrusted, "the credentials of the endpoint on \(socketPath) could not be read: \(error.reason)")
        }
        try admit(peer)
        try send(Array((line + "\n").utf8))
        self.completion = completion
        do {
            registration = try loop.watch(socket, for: .readable) { [weak self] _ in self?.receive() }
        } catch {
            throw ControlError(error)
        }
        deadline = loop.schedule(at: loop.now + timeout) { [weak self] in
            self?.deadline = nil
            self?.finish(.failure(ControlError(.timedOut, "no complete reply from \(socketPath) within \(timeout)")))
        }
    }

    deinit {
        tearDown()  // unwatched before its socket closes (on the loop's thread, as every owner is)
    }

    /// Whether it has ended (its completion ran, or it was cancelled).
    package var isFinished: Bool { completion == nil }

    /// Ends the exchange without calling its completion, and closes the socket's watch.
    package func cancel() {
        completion = nil
        tearDown()
    }

    private static func connect(to path: String) throws(ControlError) -> FileDescriptor {
        do throws(SystemError) {
            let address = try UnixSocketAddress(path: path)
            let socket = try FileDescriptor.unixStreamSocket(nonBlocking: true)
            try socket.connect(to: address)
            return socket
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
    }

    /// Sends the request whole: a request is a short line, which a fresh connection's buffer
    /// takes at once; one it does not take is a failure, not a wait.
    private func send(_ bytes: [UInt8]) throws(ControlError) {
        let sent: Int?
        do {
            sent = try socket.send(bytes[...])
        } catch  where error.errno == EPIPE || error.errno == ECONNRESET {
            return  // the endpoint closed its side: its reply (a refusal) may wait to be read
        } catch {
            throw ControlError(error)
        }
        guard sent == bytes.count else { throw ControlError(.timedOut, "\(socketPath) did not take the request at once") }
    }

    /// Reads what is there (at most one buffer's worth a turn, so one peer cannot hold the loop).
    private func receive() {
        guard completion != nil else { return }
        var chunk = [UInt8](repeating: 0, count: 4096)
        for _ in 0..<16 {
            do {
                guard let count = try ControlClient.receiveChunk(on: socket, into: &chunk) else { return }  // nothing more yet
                if let line = try ControlClient.appendReply(chunk[0..<count], to: &received, socketPath: socketPath, limit: maximumReplyBytes) {
                    finish(.success((line, peer)))
                    return
                }
            } catch {
                finish(.failure(error))
                return
            }
        }
    }

    private func finish(_ outcome: Outcome) {
        guard let completion else { return }
        self.completion = nil
        tearDown()
        completion(outcome)
    }

    private func tearDown() {
        if let registration { loop.unwatch(registration) }
        registration = nil
        if let deadline { loop.cancel(deadline) }
        deadline = nil
        received = []
    }
}

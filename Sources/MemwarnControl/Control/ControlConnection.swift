import MemwarnSystem

/// One client of a control endpoint, from accept to close: the request line it is sending,
/// then the reply it is being sent. Used only on the endpoint's thread; closing it closes the
/// socket.
final class ControlConnection {
    /// What the connection waits for.
    enum Phase {
        /// The client's request line.
        case reading
        /// Room in the socket for the rest of the reply.
        case replying
    }

    /// What a read found.
    enum ReadOutcome {
        /// No complete line yet; wait for more.
        case waiting
        /// A complete line, without its newline (or everything sent before the client shut down its side).
        case line([UInt8])
        /// More than `maximumLineBytes` without a newline.
        case tooLong
        /// The client left without sending anything, or the socket failed.
        case closed
    }

    /// The non-blocking socket.
    let socket: FileDescriptor
    private(set) var phase = Phase.reading
    /// Its registration on the endpoint's loop, once watched.
    var registration: EventLoop.Registration?
    /// The pending deadline on the endpoint's loop.
    var deadline: EventLoop.Deadline?
    /// The peer's pid (`SO_PEERCRED`), once the connection was admitted.
    var peerPid: Int32 = 0
    private var received: [UInt8] = []
    private var unsent: ArraySlice<UInt8> = []

    init(_ socket: consuming FileDescriptor) {
        self.socket = socket
    }

    /// Reads what the socket holds, up to the end of the request line.
    func read() -> ReadOutcome {
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let count: Int?
            do {
                count = try socket.receive(into: &chunk)
            } catch {
                return .closed
            }
            guard let count else { return .waiting }
            if count == 0 { return received.isEmpty ? .closed : .line(received) }
            let searchFrom = received.count
            received += chunk[0..<count]
            if let newline = received[searchFrom...].firstIndex(of: UInt8(ascii: "\n")) {
                return newline > ControlRequest.maximumLineBytes ? .tooLong : .line(Array(received[..<newline]))
            }
            if received.count > ControlRequest.maximumLineBytes { return .tooLong }
        }
    }

    /// Starts sending `reply` (a newline is added) and sends what the socket takes now.
    ///
    /// - Returns: whether the connection is done: all sent, or the client is gone.
    func startReply(_ reply: String) -> Bool {
        phase = .replying
        unsent = ArraySlice((reply + "\n").utf8)
        return sendMore()
    }

    /// Sends more of the reply.
    ///
    /// - Returns: whether the connection is done: all sent, or the client is gone.
    func sendMore() -> Bool {
        while !unsent.isEmpty {
            let count: Int?
            do {
                count = try socket.send(unsent)
            } catch {
                return true  // the client is gone
            }
            guard let count else { return false }  // no room now: wait for the socket to drain
            unsent = unsent.dropFirst(count)
        }
        return true
    }
}

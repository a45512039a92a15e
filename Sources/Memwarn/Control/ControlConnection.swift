import CLibcgroup  // MSG_NOSIGNAL: in a clean build it is found only through CLibcgroup (its shim includes sys/socket.h)
#if canImport(Glibc)
import Glibc
#endif

/// One client of a control endpoint, from accept to close: the request line it is sending,
/// then the reply it is being sent. Used only on the endpoint's thread.
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
        /// More than ``ControlRequest/maximumLineBytes`` without a newline.
        case tooLong
        /// The client left without sending anything, or the socket failed.
        case closed
    }

    /// The non-blocking socket.
    let descriptor: Int32
    private(set) var phase = Phase.reading
    /// The pending deadline's ID on the endpoint's event loop.
    var deadline: Int?
    private var received: [UInt8] = []
    private var unsent: ArraySlice<UInt8> = []

    init(descriptor: Int32) {
        self.descriptor = descriptor
    }

    /// Reads what the socket holds, up to the end of the request line.
    func read() -> ReadOutcome {
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = chunk.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count < 0 {
                if errno == EINTR { continue }
                return errno == EAGAIN || errno == EWOULDBLOCK ? .waiting : .closed
            }
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
            let count = unsent.withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if count < 0 {
                if errno == EINTR { continue }
                return !(errno == EAGAIN || errno == EWOULDBLOCK)
            }
            unsent = unsent.dropFirst(count)
        }
        return true
    }
}

import MemwarnSystem

/// A Unix-socket client driven by hand: connect, send whatever a test wants (or nothing, as a
/// flood of idle connections does), read to the end.
public final class RawControlClient: Sendable {
    /// Why a connection could not be made.
    public struct ConnectError: Error, CustomStringConvertible {
        public var description: String
    }

    private let socket: Locked<FileDescriptor?>

    /// Connects to the socket at `path`; every read waits at most 10 s.
    public init(_ path: String) throws {
        do throws(SystemError) {
            let address = try UnixSocketAddress(path: path)
            let socket = try FileDescriptor.unixStreamSocket(nonBlocking: false)
            try socket.setTimeouts(.seconds(10))
            try socket.connect(to: address)
            self.socket = Locked(socket)
        } catch {
            throw ConnectError(description: "\(error)")
        }
    }

    /// Sends text, ignoring failures (the endpoint may have closed already; no SIGPIPE).
    public func send(_ text: String) {
        socket.withLock { socket in
            guard let descriptor = socket.take() else { return }
            _ = try? descriptor.send(ArraySlice(text.utf8))
            socket = consume descriptor
        }
    }

    /// Everything the endpoint sends until it closes (or a read waits 10 s).
    public func readToEnd() -> String {
        socket.withLock { socket in
            guard let descriptor = socket.take() else { return "" }
            var bytes: [UInt8] = []
            var chunk = [UInt8](repeating: 0, count: 4096)
            while true {
                let count = try? descriptor.receive(into: &chunk)
                guard let count, count > 0 else { break }
                bytes += chunk[0..<count]
            }
            socket = consume descriptor
            return String(decoding: bytes, as: UTF8.self)
        }
    }

    /// Closes the connection (a second call does nothing).
    public func close() {
        socket.withLock { $0 = nil }
    }
}

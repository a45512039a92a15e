#if canImport(Glibc)
import Glibc
#endif

/// A Unix-socket client driven by hand: connect, send whatever a test wants (or nothing, as a
/// flood of idle connections does), read to the end.
public final class RawControlClient {
    /// Why a connection could not be made.
    public struct ConnectError: Error, CustomStringConvertible {
        public var description: String
    }

    private var descriptor: Int32

    /// Connects to the socket at `path`; every read waits at most 10 s.
    public init(_ path: String) throws {
        var address = sockaddr_un()
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard path.utf8.count < capacity else { throw ConnectError(description: "socket path too long: \(path)") }
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in path.utf8.enumerated() { raw[index] = byte }
        }
        descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var limit = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard connected == 0 else {
            let reason = String(cString: strerror(errno))
            Glibc.close(descriptor)
            throw ConnectError(description: "connect \(path): \(reason)")
        }
    }

    /// Sends text, ignoring failures (the endpoint may have closed already; no SIGPIPE).
    public func send(_ text: String) {
        _ = Array(text.utf8).withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    /// Everything the endpoint sends until it closes (or a read waits 10 s).
    public func readToEnd() -> String {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = chunk.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { return String(decoding: bytes, as: UTF8.self) }
            bytes += chunk[0..<count]
        }
    }

    public func close() {
        guard descriptor >= 0 else { return }
        Glibc.close(descriptor)
        descriptor = -1
    }

    deinit { close() }
}

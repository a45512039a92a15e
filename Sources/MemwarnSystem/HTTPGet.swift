#if canImport(Glibc)
import Glibc
#endif

/// One plain HTTP/1.0 `GET`, blocking, with a deadline: what `memwarn soak` needs to see whether
/// a service is ready (`--ready-url`) and to read its `/metrics`. Only `http://` URLs whose host
/// is an IP address or `localhost`: a soak talks to a service on this machine (and a static
/// build has no resolver).
package enum HTTPGet {
    /// An `http://host[:port][/path]` URL.
    package struct Address: Sendable, Hashable, CustomStringConvertible {
        package var host: String
        package var port: UInt16
        package var path: String

        /// Parses `text`; `nil` with the reason in `problem` when it is not an `http://` URL.
        package static func parse(_ text: String) -> Result<Address, AddressProblem> {
            guard text.hasPrefix("http://") else {
                return .failure(
                    AddressProblem(
                        text.hasPrefix("https://")
                            ? "only http:// URLs: a soak talks to a service on this machine"
                            : "not an http:// URL (example: http://127.0.0.1:8080/healthz)"))
            }
            let rest = text.dropFirst("http://".count)
            let authority = rest.prefix { $0 != "/" }
            let path = rest.dropFirst(authority.count)
            var host = Substring(authority)
            var port: UInt16 = 80
            if authority.hasPrefix("[") {  // [::1]:8080
                guard let close = authority.firstIndex(of: "]") else { return .failure(AddressProblem("an IPv6 host needs its closing ]")) }
                host = authority[authority.index(after: authority.startIndex)..<close]
                let after = authority[authority.index(after: close)...]
                if !after.isEmpty {
                    guard after.hasPrefix(":"), let number = UInt16(after.dropFirst()), number > 0 else {
                        return .failure(AddressProblem("no valid port after the host"))
                    }
                    port = number
                }
            } else if let colon = authority.lastIndex(of: ":") {
                guard let number = UInt16(authority[authority.index(after: colon)...]), number > 0 else {
                    return .failure(AddressProblem("\"\(authority[authority.index(after: colon)...])\" is not a port"))
                }
                host = authority[..<colon]
                port = number
            }
            guard !host.isEmpty else { return .failure(AddressProblem("no host")) }
            // No name lookup (no resolver library in a static build, and a soaked service is local):
            // an IP address, or localhost.
            guard host == "localhost" || SocketAddress(literal: String(host), port: port) != nil else {
                return .failure(AddressProblem("\"\(host)\" is not an IP address or localhost: a soak talks to a service on this machine"))
            }
            guard !path.contains(where: { $0 == " " || $0 == "\r" || $0 == "\n" }) else {
                return .failure(AddressProblem("the path has a space or a line break"))
            }
            return .success(Address(host: String(host), port: port, path: path.isEmpty ? "/" : String(path)))
        }

        /// The socket addresses the host stands for: an IP literal's one, or `localhost`'s two.
        var socketAddresses: [SocketAddress] {
            let hosts = host == "localhost" ? ["127.0.0.1", "::1"] : [host]
            return hosts.compactMap { SocketAddress(literal: $0, port: port) }
        }

        /// The same host and port, with another path.
        package func with(path: String) -> Address { Address(host: host, port: port, path: path) }

        /// `http://host:port` with no path.
        package var origin: String { "http://\(host.contains(":") ? "[\(host)]" : host):\(port)" }

        package var description: String { origin + path }
    }

    /// An IPv4 or IPv6 socket address, ready for `connect`.
    struct SocketAddress {
        var family: Int32
        var storage: sockaddr_storage
        var length: socklen_t

        /// `127.0.0.1` or `::1` and a port; `nil` for anything that is not an IP literal.
        init?(literal host: String, port: UInt16) {
            storage = sockaddr_storage()
            var ipv4 = sockaddr_in()
            var ipv6 = sockaddr_in6()
            if inet_pton(AF_INET, host, &ipv4.sin_addr) == 1 {
                ipv4.sin_family = sa_family_t(AF_INET)
                ipv4.sin_port = port.bigEndian
                family = AF_INET
                length = socklen_t(MemoryLayout<sockaddr_in>.size)
                withUnsafeBytes(of: ipv4) { source in withUnsafeMutableBytes(of: &storage) { $0.copyMemory(from: source) } }
            } else if inet_pton(AF_INET6, host, &ipv6.sin6_addr) == 1 {
                ipv6.sin6_family = sa_family_t(AF_INET6)
                ipv6.sin6_port = port.bigEndian
                family = AF_INET6
                length = socklen_t(MemoryLayout<sockaddr_in6>.size)
                withUnsafeBytes(of: ipv6) { source in withUnsafeMutableBytes(of: &storage) { $0.copyMemory(from: source) } }
            } else {
                return nil
            }
        }
    }

    /// Why a text is not an address ``HTTPGet`` can use.
    package struct AddressProblem: Error, Sendable, CustomStringConvertible {
        package var description: String
        init(_ description: String) { self.description = description }
    }

    /// A reply: the status code and the body (at most ``maximumBodyBytes``).
    package struct Response: Sendable {
        package var status: Int
        package var body: String
    }

    /// The most of a body read: a longer one is cut there, and the rest never read.
    package static let maximumBodyBytes = 8 << 20
    /// The most of a reply's head (the status line and the headers) read: a head that does not
    /// end within it is not HTTP.
    package static let maximumHeadBytes = 64 << 10

    /// Sends `GET` and reads the reply, or fails within `timeout`. Both bounds hold however the
    /// peer sends: a reply that keeps coming without a pause is cut at ``maximumHeadBytes`` plus
    /// ``maximumBodyBytes``, and the deadline is checked before every read, not only when a read
    /// would wait.
    ///
    /// - Parameters:
    ///   - address: the URL.
    ///   - timeout: for the whole exchange: connecting, sending and reading every byte.
    /// - Returns: the reply, its body cut at ``maximumBodyBytes``.
    /// - Throws: ``SystemError`` when the connection is refused or the exchange outlasts
    ///   `timeout` (`ETIMEDOUT`), or the reply is not HTTP (`EPROTO`, a head longer than
    ///   ``maximumHeadBytes`` included).
    package static func get(_ address: Address, timeout: Duration) throws(SystemError) -> Response {
        let deadline = ContinuousClock.now + timeout
        // Every address the host stands for, in order, until one connects (`localhost` is 127.0.0.1
        // and ::1: a service may listen on either alone).
        var lastFailure = SystemError("connect", errno: ECONNREFUSED, path: address.description)
        var connected: Int32 = -1
        for socketAddress in address.socketAddresses where connected < 0 {
            do {
                connected = try connect(socketAddress, address: address, until: deadline)
            } catch  where error.errno == ETIMEDOUT && error.call == "an answer" {
                throw error
            } catch {
                lastFailure = error
            }
        }
        guard connected >= 0 else { throw lastFailure }
        let descriptor = connected
        defer { close(descriptor) }
        let request = Array(
            "GET \(address.path) HTTP/1.0\r\nHost: \(address.origin.dropFirst("http://".count))\r\nConnection: close\r\nUser-Agent: memwarn-soak\r\n\r\n".utf8)
        var sent = 0
        while sent < request.count {
            let count = request[sent...].withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if count > 0 {
                sent += count
            } else if count < 0 && (errno == EAGAIN || errno == EINTR) {
                try wait(descriptor, for: Int16(POLLOUT), until: deadline, address: address)
            } else {
                throw SystemError("send", path: address.description)
            }
        }
        // Read until the peer closes, the reply reaches its bound, or the deadline passes: a peer
        // that streams without a pause never makes a read wait, so the deadline is checked here too.
        let limit = maximumHeadBytes + maximumBodyBytes
        var reply: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        while reply.count < limit {
            guard ContinuousClock.now < deadline else { throw SystemError("an answer", errno: ETIMEDOUT, path: address.description) }
            let wanted = min(chunk.count, limit - reply.count)
            let count = chunk.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, wanted, 0) }
            if count > 0 {
                reply += chunk[..<count]
            } else if count == 0 {
                break
            } else if errno == EAGAIN || errno == EINTR {
                try wait(descriptor, for: Int16(POLLIN), until: deadline, address: address)
            } else {
                throw SystemError("recv", path: address.description)
            }
        }
        return try parse(reply, address: address)
    }

    /// A socket connected to one address, or the failure.
    private static func connect(_ target: SocketAddress, address: Address, until deadline: ContinuousClock.Instant) throws(SystemError) -> Int32 {
        let descriptor = socket(target.family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw SystemError("socket") }
        do throws(SystemError) {
            var storage = target.storage
            let status = withUnsafePointer(to: &storage) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(descriptor, $0, target.length) }
            }
            if status != 0 {
                guard errno == EINPROGRESS else { throw SystemError("connect", path: address.description) }
                try wait(descriptor, for: Int16(POLLOUT), until: deadline, address: address)
                var failure: Int32 = 0
                var length = socklen_t(MemoryLayout<Int32>.size)
                getsockopt(descriptor, SOL_SOCKET, SO_ERROR, &failure, &length)
                guard failure == 0 else { throw SystemError("connect", errno: failure, path: address.description) }
            }
            return descriptor
        } catch {
            close(descriptor)
            throw error
        }
    }

    /// The status line's code and the body after the blank line (at most ``maximumBodyBytes``).
    ///
    /// - Throws: ``SystemError`` (`EPROTO`) when the reply is not HTTP, or its head runs past
    ///   ``maximumHeadBytes`` without its blank line.
    static func parse(_ reply: [UInt8], address: Address) throws(SystemError) -> Response {
        let head = reply.prefix(maximumHeadBytes)
        let statusLine = String(decoding: head.prefix { $0 != 13 && $0 != 10 }, as: UTF8.self)
        let parts = statusLine.split(separator: " ", maxSplits: 2)
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/1."), let status = Int(parts[1]), (100...599).contains(status) else {
            throw SystemError("an HTTP reply", errno: EPROTO, path: address.description)
        }
        var body = ""
        if let end = head.indices.dropLast(3).first(where: { reply[$0] == 13 && reply[$0 + 1] == 10 && reply[$0 + 2] == 13 && reply[$0 + 3] == 10 }) {
            body = String(decoding: reply[(end + 4)...].prefix(maximumBodyBytes), as: UTF8.self)
        } else if reply.count > maximumHeadBytes {
            throw SystemError("an HTTP reply's head within \(maximumHeadBytes) bytes", errno: EPROTO, path: address.description)
        }
        return Response(status: status, body: body)
    }

    private static func wait(_ descriptor: Int32, for events: Int16, until deadline: ContinuousClock.Instant, address: Address) throws(SystemError) {
        while true {
            let left = deadline - .now
            guard left > .zero else { throw SystemError("an answer", errno: ETIMEDOUT, path: address.description) }
            var entry = pollfd(fd: descriptor, events: events, revents: 0)
            let milliseconds = Int32(clamping: max(1, left.components.seconds * 1_000 + left.components.attoseconds / 1_000_000_000_000_000))
            let ready = poll(&entry, 1, milliseconds)
            if ready > 0 { return }
            if ready < 0 && errno != EINTR { throw SystemError("poll", path: address.description) }
        }
    }
}

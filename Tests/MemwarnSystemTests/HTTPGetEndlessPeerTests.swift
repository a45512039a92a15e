import Testing

@testable import MemwarnSystem

#if canImport(Glibc)
import Glibc
#endif

/// `HTTPGet` against a real local TCP peer that never stops sending: a reply
/// that keeps coming without a pause must not hold `--ready-url`'s wait or the service watch
/// (and SIGTERM with them) past the exchange's deadline, nor fill memory.
@Suite struct HTTPGetEndlessPeerTests {
    /// A server on 127.0.0.1 that answers one connection with `head`, then sends `filler` over
    /// and over, 4 MiB a send into a large send buffer — faster than a client reading 64 KiB at a
    /// time drains it, so that the client's reads never wait — until the client goes or ``stop()``
    /// is called.
    final class EndlessPeer: Sendable {
        let port: UInt16
        private let listener: Int32
        private let stopping = Locked(false)
        /// Bytes sent so far.
        let sent = Locked(0)
        private let ended = ConditionLock(false)

        init(head: String, filler: String) throws {
            let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            try #require(listener >= 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let bound = withUnsafeMutablePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, length) == 0 && getsockname(listener, $0, &length) == 0 }
            }
            try #require(bound && listen(listener, 1) == 0)
            port = UInt16(bigEndian: address.sin_port)
            self.listener = listener
            let (stopping, ended, total) = (stopping, ended, sent)
            let head = Array(head.utf8)
            let filler = Array(String(repeating: filler, count: max(1, (4 << 20) / max(1, filler.utf8.count))).utf8)
            try SystemThread.start(name: "test-endless-peer") {
                defer { ended.withLock { $0 = true } }
                let connection = accept(listener, nil, nil)
                guard connection >= 0 else { return }
                defer { close(connection) }
                var bufferBytes: Int32 = 16 << 20
                setsockopt(connection, SOL_SOCKET, SO_SNDBUF, &bufferBytes, socklen_t(MemoryLayout<Int32>.size))
                var request = [UInt8](repeating: 0, count: 4096)
                _ = request.withUnsafeMutableBytes { recv(connection, $0.baseAddress, $0.count, 0) }
                var bytes = head
                while !stopping.withLock({ $0 }) {
                    let sent = bytes.withUnsafeBytes { send(connection, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                    guard sent > 0 else { return }  // the client went
                    total.withLock { $0 += sent }
                    bytes = sent < bytes.count ? Array(bytes[sent...]) : filler
                }
            }
        }

        /// Stops sending and closes the connection (the client then reads its end), and waits
        /// until the server's thread has ended.
        /// Safe to call twice: the listener is closed once (a second `close` would close whatever
        /// descriptor the process was given next under its number: another test's pipe, in one
        /// CI run).
        func stop() {
            guard
                stopping.withLock({ stopping in
                    defer { stopping = true }
                    return !stopping
                })
            else { return }
            shutdown(listener, Int32(SHUT_RDWR))
            _ = ended.wait(timeout: .seconds(10), until: { $0 ? true : nil })
            close(listener)
        }
    }

    /// `HTTPGet.get` with `timeout` on a thread of its own; the server is stopped `patience` after
    /// the exchange began, whatever happened, so that a client that would read forever ends all
    /// the same. The exchange runs on a system thread, not a task: on a loaded machine a task may
    /// wait for a pool thread longer than the patience (22 s in one CI run), and the peer would be
    /// stopped before it was ever asked.
    static func get(
        from peer: EndlessPeer, timeout: Duration, patience: Duration
    ) async throws -> (result: Result<HTTPGet.Response, SystemError>, took: Duration) {
        let address = HTTPGet.Address(host: "127.0.0.1", port: peer.port, path: "/metrics")
        return try await withCheckedThrowingContinuation { continuation in
            do {
                try SystemThread.start(name: "test-exchange") {
                    let ended = ConditionLock(false)
                    let started = ContinuousClock.now
                    do {
                        try SystemThread.start(name: "test-watchdog") {
                            if ended.wait(timeout: patience, until: { $0 ? true : nil }) == nil { peer.stop() }  // else the exchange ended
                        }
                    } catch {
                        continuation.resume(throwing: error)
                        return
                    }
                    let result: Result<HTTPGet.Response, SystemError>
                    do throws(SystemError) { result = .success(try HTTPGet.get(address, timeout: timeout)) } catch { result = .failure(error) }
                    let took = ContinuousClock.now - started
                    ended.withLock { $0 = true }
                    peer.stop()
                    continuation.resume(returning: (result, took))
                }
            } catch {
                continuation.resume(throwing: error)
            }
        }
    }

    @Test func anEndlessBodyIsCutAtItsBoundNotReadUntilTheDeadline() async throws {
        let peer = try EndlessPeer(head: "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\n", filler: "requests_shed_total 1\n")
        let (result, took) = try await Self.get(from: peer, timeout: .seconds(5), patience: .seconds(15))
        let response = try result.get()
        #expect(response.status == 200)
        // Cut at its bound, not ended by the deadline (that would be a timeout error, not a reply):
        // the rest is never read. (How long it took is not asserted: on a loaded machine the
        // exchange may wait for a thread; it was 8.9 s in one CI run, 0.2 s here.)
        #expect(response.body.utf8.count == HTTPGet.maximumBodyBytes, "the body is cut at its bound (took \(took))")
        // What the client read, and what the kernel's buffers held when it closed: tens of MiB, not
        // everything a peer can send until the deadline.
        #expect(peer.sent.withLock { $0 } < 64 << 20, "the peer sent \(peer.sent.withLock { $0 }) bytes")
    }

    @Test func anEndlessHeadIsNotHTTPAndIsCutAtItsBound() async throws {
        let peer = try EndlessPeer(head: "HTTP/1.0 200 OK\r\n", filler: "X-Padding: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n")
        let (result, took) = try await Self.get(from: peer, timeout: .seconds(5), patience: .seconds(15))
        guard case .failure(let error) = result else {
            Issue.record("a head with no end was taken for a reply: \(result)")
            return
        }
        #expect(error.errno == EPROTO, "refused as not HTTP at its bound, not timed out (took \(took)): \(error)")
    }
}

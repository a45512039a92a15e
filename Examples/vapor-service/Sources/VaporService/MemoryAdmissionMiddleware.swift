import Memwarn
import Metrics
import Vapor

/// Sheds load before it becomes memory the service cannot give back: answers
/// `503 Service Unavailable` with `Retry-After` instead of taking on work, in two cases.
///
/// - **Admission, by the declared size.** Vapor hands the responder chain its request once the
///   head (and at most the first read of the body) has arrived; the rest of the body is a stream
///   that the route collects after the middleware. So this middleware decides by the head: a
///   request that declares its size (`Content-Length`) reserves those bytes with memwarn's
///   `MemoryAdmission` — and what Vapor may hold of the body read ahead of the route
///   (``readAheadBytes``, at most the body's size) — and while they do not fit, beside the
///   bodies already admitted and still being read, in what is left below the critical mark, the
///   request is refused there and then; Vapor drops the body it then still receives. A declared
///   size above `largestBody` is refused with 413 the same way. A body without
///   `Content-Length` (chunked) reserves `largestBody`, and its route collects it with that
///   bound (`Request.collectAdmittedBody(upTo:)`). The reservation lasts until the route has
///   answered, when the body is queued (and counted in usage) or dropped.
/// - **Exhaustion.** memwarn enters the exhausted state when a release at `critical`, with every
///   tier asked, could not bring usage down: what is left is what the service holds. While
///   `isMemoryExhausted` (one atomic load) every request is refused, bodiless ones too, and
///   `MemoryAdmission` admits nothing either.
///
/// The exempt paths (health, metrics, status) are answered anyway: they cost next to nothing and
/// operators need them most now.
struct MemoryAdmissionMiddleware: AsyncMiddleware {
    /// What Vapor may hold of an admitted body before the route reads it: the request's
    /// async body sequence buffers up to 20 parts (its high watermark), each at most one read
    /// of 64 KiB (NIO's adaptive receive allocator).
    static let readAheadBytes = 20 * 64 << 10

    let monitor: PressureMonitor
    let admission: MemoryAdmission
    let largestBody: Int
    let retryAfterSeconds: Int
    let exemptPaths: Set<String>
    private let shed = Counter(label: "service_requests_shed_total")

    init(monitor: PressureMonitor, admission: MemoryAdmission, largestBody: Int, retryAfterSeconds: Int, exemptPaths: Set<String>) {
        self.monitor = monitor
        self.admission = admission
        self.largestBody = largestBody
        self.retryAfterSeconds = retryAfterSeconds
        self.exemptPaths = exemptPaths
    }

    func respond(to request: Request, chainingTo next: any AsyncResponder) async throws -> Response {
        guard !exemptPaths.contains(request.url.path) else { return try await next.respond(to: request) }
        let reserved: Int
        switch RequestBodySize(request.headers) {
        case .none:
            return monitor.isMemoryExhausted ? shedResponse() : try await next.respond(to: request)
        case .declared(let bytes) where bytes > largestBody:
            return Response(status: .payloadTooLarge, body: .init(string: "a body is at most \(largestBody) bytes\n"))
        case .declared(let bytes):
            reserved = bytes
        case .undeclared:
            reserved = largestBody
        }
        // The body, and what Vapor may hold of it read ahead of the route.
        guard let reservation = admission.reserve(bytes: reserved + min(reserved, Self.readAheadBytes)) else {
            return shedResponse()  // also while exhausted
        }
        defer { reservation.release() }
        return try await next.respond(to: request)
    }

    private func shedResponse() -> Response {
        shed.increment()
        return Response(
            status: .serviceUnavailable,
            headers: ["Retry-After": String(retryAfterSeconds), "Content-Type": "text/plain; charset=utf-8"],
            body: .init(string: "memory exhausted: try again in \(retryAfterSeconds) s\n"))
    }
}

/// What a request's head says of its body, before any of the body is read.
enum RequestBodySize: Equatable {
    /// No body: no `Content-Length` (or 0) and no `Transfer-Encoding`.
    case none
    /// `Content-Length` bytes.
    case declared(Int)
    /// A body of a size not said (`Transfer-Encoding: chunked`), or a `Content-Length` that is
    /// not a number (the HTTP parser refuses one before a route sees it; kept for safety).
    case undeclared

    init(_ headers: HTTPHeaders) {
        if let length = headers.first(name: .contentLength) {
            guard let bytes = Int(length), bytes >= 0 else {
                self = .undeclared
                return
            }
            self = bytes == 0 ? .none : .declared(bytes)
        } else {
            self = headers.contains(name: .transferEncoding) ? .undeclared : .none
        }
    }
}

extension Request {
    /// The request's body in one buffer, read after ``MemoryAdmissionMiddleware`` admitted it
    /// (the route is registered with `body: .stream`).
    ///
    /// The buffer is allocated once, before the first byte is read: `Content-Length` bytes when
    /// the size is declared (at most `limit`), else `limit`. It never grows, so reading a body
    /// costs what was reserved for it — Vapor's own `collect` appends to a buffer that doubles
    /// as parts arrive, leaving the old copies to the allocator while a burst is read.
    ///
    /// - Parameter limit: the largest body accepted.
    /// - Returns: the body.
    /// - Throws: `Abort(.payloadTooLarge)` when the body is longer than `limit` or than it
    ///   declared; what reading the body throws.
    func collectAdmittedBody(upTo limit: Int) async throws -> ByteBuffer {
        let bound: Int
        switch RequestBodySize(headers) {
        case .none: return ByteBuffer()
        case .declared(let bytes): bound = min(bytes, limit)
        case .undeclared: bound = limit
        }
        var buffer = byteBufferAllocator.buffer(capacity: bound)
        for try await part in body {
            guard buffer.readableBytes + part.readableBytes <= bound else { throw Abort(.payloadTooLarge) }
            buffer.writeImmutableBuffer(part)
        }
        return buffer
    }
}

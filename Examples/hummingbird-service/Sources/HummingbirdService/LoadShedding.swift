import HTTPTypes
import Hummingbird
import Memwarn
import Metrics

/// Sheds load before it becomes memory the service cannot give back: answers 503 Service
/// Unavailable with `Retry-After` instead of taking on work, in two cases.
///
/// - **Admission, by the declared size.** Hummingbird hands a route its request as soon as the
///   head has been parsed; the body is a stream the handler reads afterwards. This middleware
///   runs before any of it is read: a request that declares its size (`Content-Length`)
///   reserves those bytes with memwarn's `MemoryAdmission` — and what the server may hold of
///   the body read ahead of the handler (``ReadAhead/bytes``, at most the body's size) — and
///   while they do not fit, beside the bodies already admitted and still being read, in what is
///   left below the critical mark, the request is refused there and then, its body never
///   collected. A declared size above the largest body accepted is refused with 413 the same
///   way. A body sent without a `Content-Length` (chunked) reserves the largest body accepted,
///   and its handler collects it with that bound (`Request.collectAdmittedBody(upTo:)`). The
///   reservation lasts until the handler returns, when the body is queued (and counted in
///   usage) or dropped. This catches a burst — 32 uploads of 6 MiB at once under 128 MiB —
///   before any reading of usage could: exhaustion alone is found only after a release at
///   `critical` has failed, too late for work arriving faster than that.
/// - **Exhaustion.** memwarn enters the exhausted state when a release at `critical`, with every
///   tier asked, could not bring usage down: what is left is what the service holds. It leaves
///   the state once usage is back below the warning mark. `isMemoryExhausted` is one atomic load;
///   while it holds, `MemoryAdmission` admits nothing either.
///
/// A refused request's body is never collected: Hummingbird, to keep the connection for the
/// client's next request (and so that a client that sends its whole body before it reads the
/// answer gets the 503), reads what the client still sends and drops it, a part at a time. What
/// it holds meanwhile (at most ``ReadAhead/bytes`` a connection) is not reserved: for every
/// connection refused at once it must fit in the room between the critical mark and the limit
/// (32 connections: 7 MiB of the 12.8 MiB under 128 MiB). The exempt paths (health, metrics)
/// are answered anyway: they cost next to nothing and operators need them most now.
struct LoadSheddingMiddleware<Context: RequestContext>: RouterMiddleware {
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

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard !exemptPaths.contains(request.uri.path) else { return try await next(request, context) }
        let reserved: Int
        switch RequestBodySize(request.headers) {
        case .none:
            return monitor.isMemoryExhausted ? shedResponse() : try await next(request, context)
        case .declared(let bytes) where bytes > largestBody:
            return tooLargeResponse()  // refused unread too
        case .declared(let bytes):
            reserved = bytes
        case .undeclared:
            reserved = largestBody
        }
        // The body, and what the server may hold of it read ahead of the handler.
        let cost = reserved + min(reserved, ReadAhead.bytes)
        guard let reservation = admission.reserve(bytes: cost) else { return shedResponse() }  // also while exhausted
        defer { reservation.release() }
        return try await next(request, context)
    }

    private func tooLargeResponse() -> Response {
        Response(status: .contentTooLarge, headers: [.contentType: "text/plain; charset=utf-8"],
                 body: .init(byteBuffer: ByteBuffer(string: "a body is at most \(largestBody) bytes\n")))
    }

    private func shedResponse() -> Response {
        shed.increment()
        return Response(status: .serviceUnavailable,
                        headers: [.retryAfter: String(retryAfterSeconds), .contentType: "text/plain; charset=utf-8"],
                        body: .init(byteBuffer: ByteBuffer(string: "memory exhausted: try again in \(retryAfterSeconds) s\n")))
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

    init(_ headers: HTTPFields) {
        if let length = headers[.contentLength] {
            guard let bytes = Int(length), bytes >= 0 else {
                self = .undeclared
                return
            }
            self = bytes == 0 ? .none : .declared(bytes)
        } else {
            self = headers[.transferEncoding] == nil ? .none : .undeclared
        }
    }
}

extension Request {
    /// The request's body in one buffer, read after ``LoadSheddingMiddleware`` admitted it.
    ///
    /// The buffer is allocated once, before the first byte is read: `Content-Length` bytes when
    /// the size is declared (at most `limit`), else `limit` (a bounded streaming collect of a
    /// chunked body: pages the body does not reach are never touched). It never grows, so
    /// reading a body costs what was reserved for it — a buffer grown by doubling as chunks
    /// arrive would copy the body at each step and leave the old copies to the allocator, more
    /// memory than the reservation counts while a burst is read.
    ///
    /// - Parameter limit: the largest body accepted.
    /// - Returns: the body.
    /// - Throws: `NIOTooManyBytesError` (answered 413) when the body is longer than `limit` or
    ///   than it declared; what reading the body throws.
    func collectAdmittedBody(upTo limit: Int) async throws -> ByteBuffer {
        let bound: Int
        switch RequestBodySize(headers) {
        case .none: return ByteBuffer()
        case .declared(let bytes): bound = min(bytes, limit)
        case .undeclared: bound = limit
        }
        var buffer = ByteBufferAllocator().buffer(capacity: bound)
        try await body.collect(upTo: bound, into: &buffer)
        return buffer
    }
}

import Hummingbird
import Memwarn
import Metrics

/// Sheds load before it becomes memory the service cannot give back: answers 503 Service
/// Unavailable with `Retry-After` instead of taking on work, in two cases.
///
/// - **Admission.** A request with a body is admitted against memwarn's `MemoryAdmission`: its
///   declared length (`Content-Length`, else the largest body the service accepts) must fit, with
///   the bodies of the requests already admitted and still being read, in what is left below the
///   critical mark. The reservation lasts until the handler returns, when the body is queued (and
///   counted in usage) or dropped. This catches a burst — 32 uploads of 6 MB at once under
///   128 MiB — before any reading of usage could: exhaustion alone is found only after a release
///   at `critical` has failed, too late for work arriving faster than that.
/// - **Exhaustion.** memwarn enters the exhausted state when a release at `critical`, with every
///   tier asked, could not bring usage down: what is left is what the service holds. It leaves
///   the state once usage is back below the warning mark. `isMemoryExhausted` is one atomic load.
///
/// The exempt paths (health, metrics) are answered anyway: they cost next to nothing and
/// operators need them most now.
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
        guard Self.hasBody(request) else {
            return monitor.isMemoryExhausted ? shedResponse() : try await next(request, context)
        }
        let declared = request.headers[.contentLength].flatMap { Int($0) }.map { min($0, largestBody) } ?? largestBody
        guard let reservation = admission.reserve(bytes: declared) else { return shedResponse() }  // also while exhausted
        defer { reservation.release() }
        return try await next(request, context)
    }

    private static func hasBody(_ request: Request) -> Bool {
        request.headers[.contentLength].map { $0 != "0" } ?? (request.headers[.transferEncoding] != nil)
    }

    private func shedResponse() -> Response {
        shed.increment()
        return Response(status: .serviceUnavailable,
                        headers: [.retryAfter: String(retryAfterSeconds), .contentType: "text/plain; charset=utf-8"],
                        body: .init(byteBuffer: ByteBuffer(string: "memory exhausted: try again in \(retryAfterSeconds) s\n")))
    }
}

import Hummingbird
import Memwarn
import Metrics

/// Sheds load while memory is exhausted: answers 503 Service Unavailable with `Retry-After`
/// instead of taking on work.
///
/// memwarn enters the exhausted state when a release at `critical`, with every tier asked, could
/// not bring usage down and usage is still at the critical mark: what is left is what the service
/// holds, and taking more work now leads to the OOM killer. It leaves the state once usage is
/// back below the warning mark. `isMemoryExhausted` is one atomic load, cheap enough for every
/// request. The exempt paths (health, metrics) are answered anyway: they cost next to nothing and
/// operators need them most now.
struct LoadSheddingMiddleware<Context: RequestContext>: RouterMiddleware {
    let monitor: PressureMonitor
    let retryAfterSeconds: Int
    let exemptPaths: Set<String>
    private let shed = Counter(label: "service_requests_shed_total")

    init(monitor: PressureMonitor, retryAfterSeconds: Int, exemptPaths: Set<String>) {
        self.monitor = monitor
        self.retryAfterSeconds = retryAfterSeconds
        self.exemptPaths = exemptPaths
    }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard monitor.isMemoryExhausted, !exemptPaths.contains(request.uri.path) else {
            return try await next(request, context)
        }
        shed.increment()
        return Response(status: .serviceUnavailable,
                        headers: [.retryAfter: String(retryAfterSeconds), .contentType: "text/plain; charset=utf-8"],
                        body: .init(byteBuffer: ByteBuffer(string: "memory exhausted: try again in \(retryAfterSeconds) s\n")))
    }
}

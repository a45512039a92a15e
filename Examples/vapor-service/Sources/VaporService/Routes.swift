import Memwarn
import Prometheus
import Synchronization
import Vapor

/// The service's routes (see VaporService.swift for what each holds).
func routes(
    _ app: Application, monitor: PressureMonitor, admission: MemoryAdmission, registry: PrometheusCollectorRegistry,
    database: Database, renders: RenderCache, jobs: JobQueue
) {
    let serviceMetrics = ServiceMetrics()
    app.get("healthz") { _ in "ok\n" }
    app.get("metrics") { _ -> Response in
        serviceMetrics.record(renders: renders, jobs: jobs, database: database)
        // swift-metrics carries no help text: memwarn's families get their `# HELP` lines here.
        let text = MemwarnMetric.addingHelp(to: registry.emitToString())
        return Response(status: .ok, headers: ["Content-Type": "text/plain; version=0.0.4; charset=utf-8"], body: .init(string: text))
    }
    app.get("status") { _ in
        ServiceStatus(monitor: monitor, admission: admission, renders: renders, jobs: jobs, database: database)
    }
    // Any id: the row is `id` modulo the table's size, the page is cached under `id`, so new ids
    // keep the cache growing until memwarn takes it back.
    let reportCount = ReportCount(database: database)
    app.get("reports", ":id") { request async throws -> Response in
        guard let id = request.parameters.get("id", as: Int.self), id >= 0 else { throw Abort(.badRequest) }
        if let page = renders.page(for: id) { return htmlResponse(page, cache: "hit") }
        let rowID = id % (try await reportCount.value()) + 1
        guard let row = try await database.report(rowID) else { throw Abort(.notFound) }
        let page = renderReport(row, as: id, bytes: renders.bytesPerRender)
        renders.store(page, for: id)
        return htmlResponse(page, cache: "miss")
    }
    app.get("users", ":user", "dashboard") { request async throws -> Response in
        let user = try request.parameters.require("user")
        let reports = try await database.reports(of: user, limit: 50)
        var page = ByteBufferAllocator().buffer(capacity: 4096)
        page.writeString("<!doctype html><title>\(user)</title><h1>\(user)'s reports</h1>\n<ul>\n")
        for report in reports { page.writeString("<li><a href=\"/reports/\(report.id)\">\(report.title)</a> \(report.amount)</li>\n") }
        page.writeString("</ul>\n")
        return htmlResponse(page, cache: nil)
    }
    // `body: .stream`: the body is read by the route, into one buffer of the size admitted
    // (MemoryAdmissionMiddleware), not collected by Vapor beforehand.
    app.on(.POST, "jobs", body: .stream) { request async throws -> Response in
        let payload = try await request.collectAdmittedBody(upTo: VaporService.largestJob)
        let position = jobs.enqueue(payload)
        return Response(status: .accepted, headers: ["Content-Type": "application/json"], body: .init(string: "{\"queued\":\(position)}\n"))
    }
}

private func htmlResponse(_ page: ByteBuffer, cache: String?) -> Response {
    var headers: HTTPHeaders = ["Content-Type": "text/html; charset=utf-8"]
    if let cache { headers.add(name: "X-Cache", value: cache) }
    return Response(status: .ok, headers: headers, body: .init(buffer: page))
}

/// The number of rows in `reports`, read once.
final class ReportCount: Sendable {
    private let database: Database
    private let cached = Mutex<Int?>(nil)

    init(database: Database) { self.database = database }

    func value() async throws -> Int {
        if let count = cached.withLock({ $0 }) { return count }
        let count = try await database.reportCount()
        guard count > 0 else { throw Abort(.serviceUnavailable, reason: "the reports table is empty") }
        cached.withLock { $0 = count }
        return count
    }
}

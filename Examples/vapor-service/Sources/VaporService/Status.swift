import Memwarn
import Metrics
import Vapor

/// `GET /status`: what the service holds and what memwarn sees, as JSON.
struct ServiceStatus: Content {
    var level: String
    var exhausted: Bool
    var renders: Int
    var renderBytes: Int
    var jobsQueued: Int
    var jobBytes: Int
    /// Bytes reserved by the bodies admitted and still being read.
    var admittedBodyBytes: Int
    /// What admission has left below the critical mark, less those reservations.
    var admissionHeadroomBytes: Int?
    var connectionsOpen: Int
    var connectionsIdle: Int

    init(monitor: PressureMonitor, admission: MemoryAdmission, renders: RenderCache, jobs: JobQueue, database: Database) {
        level = monitor.level.rawValue
        exhausted = monitor.isMemoryExhausted
        self.renders = renders.entries
        renderBytes = renders.bytes
        jobsQueued = jobs.count
        jobBytes = jobs.bytes
        admittedBodyBytes = admission.reservedBytes
        admissionHeadroomBytes = admission.headroomBytes
        connectionsOpen = database.openConnections
        connectionsIdle = database.idleConnections
    }
}

/// The service's own gauges, read when `/metrics` is scraped (memwarn's come from the monitor).
final class ServiceMetrics: Sendable {
    private let renderEntries = Gauge(label: "service_render_cache_entries")
    private let renderBytes = Gauge(label: "service_render_cache_bytes")
    private let jobsQueued = Gauge(label: "service_jobs_queued")
    private let jobBytes = Gauge(label: "service_jobs_queued_bytes")
    private let connections = Gauge(label: "service_database_connections_open")

    func record(renders: RenderCache, jobs: JobQueue, database: Database) {
        renderEntries.record(renders.entries)
        renderBytes.record(renders.bytes)
        jobsQueued.record(jobs.count)
        jobBytes.record(jobs.bytes)
        connections.record(database.openConnections)
    }
}

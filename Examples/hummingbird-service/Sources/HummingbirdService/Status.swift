import Hummingbird
import Memwarn
import MemwarnLifeCycle
import Metrics

/// `GET /status`: what the service holds and what memwarn sees, as JSON.
struct ServiceStatus: ResponseEncodable {
    var level: String
    var exhausted: Bool
    var floorBytes: UInt64?
    var renders: Int
    var renderBytes: Int
    var jobsQueued: Int
    var jobBytes: Int
    /// Bytes reserved by the bodies admitted and still being read (`nil` without admission:
    /// the baselines).
    var admittedBodyBytes: Int?
    /// What admission has left below the critical mark, less those reservations.
    var admissionHeadroomBytes: Int?
    var sessions: [String: Int]

    init(monitor: PressureMonitor, admission: MemoryAdmission?, renders: RenderCache, jobs: JobQueue, sessions: LifeCycleApplication) {
        level = monitor.level.rawValue
        exhausted = monitor.isMemoryExhausted
        floorBytes = monitor.exhaustion.flatMap { $0.isExhausted ? $0.floorBytes : nil }
        self.renders = renders.entries
        renderBytes = renders.bytes
        jobsQueued = jobs.count
        jobBytes = jobs.bytes
        admittedBodyBytes = admission?.reservedBytes
        admissionHeadroomBytes = admission?.headroomBytes
        self.sessions = Dictionary(sessions.units.map { ($0.state.rawValue, 1) }, uniquingKeysWith: +)
    }
}

/// The service's own gauges, read when `/metrics` is scraped (memwarn's come from the monitor).
final class ServiceMetrics: Sendable {
    private let renderEntries = Gauge(label: "service_render_cache_entries")
    private let renderBytes = Gauge(label: "service_render_cache_bytes")
    private let jobsQueued = Gauge(label: "service_jobs_queued")
    private let jobBytes = Gauge(label: "service_jobs_queued_bytes")
    private let sessions = Dictionary(uniqueKeysWithValues: LifeCycleState.allCases.map {
        ($0, Gauge(label: "service_sessions", dimensions: [("state", $0.rawValue)]))
    })

    func record(renders: RenderCache, jobs: JobQueue, sessions units: LifeCycleApplication) {
        renderEntries.record(renders.entries)
        renderBytes.record(renders.bytes)
        jobsQueued.record(jobs.count)
        jobBytes.record(jobs.bytes)
        let states = Dictionary(units.units.map { ($0.state, 1) }, uniquingKeysWith: +)
        for (state, gauge) in sessions { gauge.record(states[state] ?? 0) }
    }
}

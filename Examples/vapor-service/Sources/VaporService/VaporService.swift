// vapor-service: a Vapor 4 service over PostgreSQL that uses memwarn as its README teaches.
//
//   GET  /reports/:id      a report rendered from its row (~256 KiB), kept in a DiscardableCache:
//                          memory memwarn may take back, since any render can be made again
//   GET  /users/:user/dashboard  the user's latest reports, read from PostgreSQL (not cached)
//   POST /jobs             accepts a job (its body); the service holds it until the worker, which
//                          drains at a bounded rate, has processed it: memory only less work gives back
//   GET  /status           level, exhaustion, admission, cache, queue and connections, as JSON
//   GET  /metrics          Prometheus: memwarn's metrics, Vapor's and the service's own
//   GET  /healthz          "ok"
//
// Connections to PostgreSQL are lent by memwarn's ResourcePool: idle ones are closed at
// `critical`, and reopened on the next query. Memory is watched by memwarn's PressureMonitor,
// which Vapor's life cycle starts and stops (MemwarnLifecycle.swift); requests are admitted by
// the memory they declare, or shed with 503 and Retry-After (MemoryAdmissionMiddleware.swift).
//
// Configuration, from the environment through swift-configuration (Settings.swift): the policy
// (`MEMWARN_<KEY>`), the database (`DATABASE_HOST`, `DATABASE_PORT`, `DATABASE_USER`,
// `DATABASE_PASSWORD`, `DATABASE_NAME`) and the service (`SERVICE_DRAIN_RATE`,
// `SERVICE_RENDER_KIB`, `SERVICE_RETRY_AFTER`). Vapor's own arguments as usual:
// `vapor-service serve --hostname 127.0.0.1 --port 8080`.
import Configuration
import Logging
import Memwarn
import MemwarnConfiguration
import Metrics
import Prometheus
import Vapor

@main
struct VaporService {
    /// The largest job body accepted (a larger one is refused with 413).
    static let largestJob = 8 << 20

    static func main() async throws {
        var environment = try Environment.detect()
        try LoggingSystem.bootstrap(from: &environment)
        let logger = Logger(label: "vapor-service")

        // Metrics. One Prometheus registry for the process, bootstrapped so that Vapor's request
        // metrics and the service's counters land in it; passed to the monitor explicitly too
        // (memwarn never bootstraps).
        let registry = PrometheusCollectorRegistry()
        let metricsFactory = PrometheusMetricsFactory(registry: registry)
        MetricsSystem.bootstrap(metricsFactory)

        // Everything the service is told, from one swift-configuration reader over the
        // environment: memwarn's policy under its prefix (`MEMWARN_WARNING_RATIO`, …; nothing set
        // means memwarn's defaults), the database, the service's own settings.
        let config = ConfigReader(provider: EnvironmentVariablesProvider())
        let settings = try Settings(config: config)
        let memwarnConfig = config.scoped(to: "memwarn")
        let monitor = PressureMonitor(
            configuration: MonitorConfiguration(policy: try PressurePolicy(config: memwarnConfig)),
            logger: logger, metricsFactory: metricsFactory)
        // Warnings release what registered with the shared coordinator, in memwarn's order:
        // the render cache at `warning`, idle database connections too at `critical`.
        ReleaseCoordinator.shared.attach(to: monitor)
        ReleaseCoordinator.shared.addReportObserver { report in
            logger.info("released \(mebibytes(report.freedBytes)) at \(report.level) (target \(mebibytes(report.targetBytes)))")
        }
        monitor.addExhaustionObserver { change in
            if change.isExhausted {
                logger.warning("memory exhausted: shedding load; held in use \(mebibytes(change.heldInUseBytes))")
            } else {
                logger.notice("memory no longer exhausted: accepting load again")
            }
        }

        let app = try await Application.make(environment)
        let database = Database(configuration: settings.database, eventLoopGroup: app.eventLoopGroup, logger: logger)
        let renders = RenderCache(bytesPerRender: settings.renderBytes)
        let jobs = JobQueue()

        // memwarn's long-running parts, in a ServiceGroup that Vapor's life cycle starts before
        // the server and stops after it (MemwarnLifecycle.swift): the monitor, the policy
        // following the configuration, the control endpoint `memwarn trigger` talks to, and the
        // job worker. Shutdown closes the idle connections last, waiting for each close.
        app.lifecycle.use(
            MemwarnLifecycle(
                services: [
                    monitor,
                    PolicyFollower(monitor: monitor, config: memwarnConfig),
                    ControlService(monitor: monitor, logger: logger),
                    JobWorker(queue: jobs, jobsPerSecond: settings.drainRate, logger: logger),
                ],
                afterShutdown: { await database.closeConnections() },
                logger: logger))

        // Admission first: a request is refused before its body is read, or its route runs.
        let admission = MemoryAdmission(monitor: monitor)
        app.middleware.use(
            MemoryAdmissionMiddleware(
                monitor: monitor, admission: admission, largestBody: largestJob,
                retryAfterSeconds: settings.retryAfterSeconds, exemptPaths: ["/healthz", "/metrics", "/status"]),
            at: .beginning)
        routes(
            app, monitor: monitor, admission: admission, registry: registry,
            database: database, renders: renders, jobs: jobs)

        do {
            try await app.execute()  // `serve` until SIGTERM or SIGINT
        } catch {
            try? await app.asyncShutdown()
            throw error
        }
        try await app.asyncShutdown()  // shutdownAsync of the life-cycle handlers, in reverse
        logger.notice("stopped; \(jobs.count) accepted jobs were still queued")
    }
}

/// `bytes` as MiB with one decimal, for the log.
func mebibytes(_ bytes: some BinaryInteger) -> String {
    String(format: "%.1f MiB", Double(bytes) / 1_048_576)
}

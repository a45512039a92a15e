// hummingbird-service: a Hummingbird 2 service that uses memwarn as its README teaches.
//
//   GET  /reports/:id[?user=U]   a rendered report (~256 KiB), kept in a DiscardableCache: memory
//                                memwarn may take back, since any render can be made again
//   GET  /users/:user/dashboard  the user's session (a MemwarnLifeCycle unit) renders its dashboard
//   POST /jobs                   accepts a job (its body); the service holds it until the worker,
//                                which drains at a bounded rate, has processed it: memory that
//                                only less work gives back
//   GET  /status                 level, exhaustion, queue, cache and sessions, as JSON
//   GET  /metrics                Prometheus: memwarn's metrics, Hummingbird's and the service's own
//   GET  /healthz                "ok"
//
// Under load the renders are released first (warning, then critical); when what the service holds
// keeps rising, memwarn reports memory exhausted and the load-shedding middleware answers 503 with
// Retry-After until the queue has drained below the warning mark. Before that, a request whose
// declared body (Content-Length) does not fit below the critical mark, beside the bodies being
// read, is answered 503 with Retry-After before its body is read (memwarn's MemoryAdmission).
//
// Options: --hostname H (127.0.0.1), --port N (8080), --drain-rate JOBS_PER_S (40),
//          --render-kib KIB (256), --retry-after S (5),
//          --protection full|release-only|none (full; the others are baselines: `release-only`
//          releases but never sheds, `none` attaches nothing to the monitor, which still reports),
//          --cache-budget MIB (none: the render cache's fixed totalCostLimit, what a careful user
//          sets without memwarn), --miss-delay-ms MS (0: each render waits that long first, as for
//          a database query)
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import Memwarn
import MemwarnLifeCycle
import Metrics
import Prometheus
import ServiceLifecycle

@main
struct HummingbirdService {
    /// The largest job body accepted (a larger one is refused with 413).
    static let largestJob = 8 << 20

    static func main() async throws {
        let options: Options
        do {
            options = try Options(CommandLine.arguments.dropFirst())
        } catch {
            FileHandle.standardError.write(Data("hummingbird-service: \(error)\n".utf8))
            exit(2)
        }
        let logger = {
            var logger = Logger(label: "hummingbird-service")
            logger.logLevel = ProcessInfo.processInfo.environment["LOG_LEVEL"].flatMap(Logger.Level.init(rawValue:)) ?? .info
            return logger
        }()

        // Metrics. One Prometheus registry for the whole process, bootstrapped, so that
        // Hummingbird's MetricsMiddleware and this service's own counters land in it. The same
        // factory is also passed to the monitor explicitly: memwarn never bootstraps, and a
        // monitor given no factory takes `MetricsSystem.factory` when it is made, so passing it
        // keeps memwarn's metrics independent of the order of these lines.
        let registry = PrometheusCollectorRegistry()
        let metricsFactory = PrometheusMetricsFactory(registry: registry)
        MetricsSystem.bootstrap(metricsFactory)

        // memwarn, on its defaults: the policy comes from the environment (`MEMWARN_CONFIG`,
        // `MEMWARN_<KEY>`; nothing set means the defaults), and the configuration reads the
        // environment too (systemd's `MEMORY_PRESSURE_WATCH`). The control service opens the
        // endpoint `memwarn trigger` talks to (`MEMWARN_CONTROL=off` withholds it).
        let environment = ProcessInfo.processInfo.environment
        let policy = try PressurePolicy.load(environment: environment)
        let monitor = PressureMonitor(configuration: MonitorConfiguration(policy: policy), logger: logger,
                                      metricsFactory: metricsFactory)
        monitor.addExhaustionObserver { change in
            if change.isExhausted {
                logger.warning("memory exhausted: shedding load; floor \(mebibytes(change.floorBytes)), held in use \(mebibytes(change.heldInUseBytes))")
            } else {
                logger.notice("memory no longer exhausted: accepting load again (usage \(mebibytes(change.usageBytes)))")
            }
        }
        ReleaseCoordinator.shared.addReportObserver { report in
            logger.info("released \(mebibytes(report.freedBytes)) at \(report.level) (target \(mebibytes(report.targetBytes)))")
        }

        // What memwarn may release: rendered reports (tier `caches`, a DiscardableCache that
        // registers itself with ReleaseCoordinator.shared when it is made).
        let renders = RenderCache(bytesPerRender: options.renderBytes, budgetBytes: options.cacheBudgetBytes,
                                  missDelay: .milliseconds(options.missDelayMilliseconds))
        // What the service holds: accepted jobs, drained at a bounded rate.
        let jobs = JobQueue()
        let worker = JobWorker(queue: jobs, jobsPerSecond: options.drainRate, logger: logger)

        // The life cycle: each user's session is a unit. Sessions idle for 2 s go to the
        // background (saved), are suspended a second later, and at `critical` memwarn terminates
        // the largest suspended ones (tier 5); the next request relaunches them from the store.
        let store = SessionStore()
        let sessions = LifeCycleApplication(logger: logger) { unit in
            Session(id: unit.id, store: store, bytesPerDashboard: options.renderBytes / 4)
        }
        let sweeper = SessionSweeper(sessions: sessions, idleAfter: .seconds(2))

        switch options.protection {
        case .full, .releaseOnly:
            // In place of `ReleaseCoordinator.shared.attach(to: monitor)`: memory warnings reach
            // the sessions' delegates first, then the shared coordinator releases, in the monitor's
            // release loop (a thread the monitor starts and stops in its `run()`).
            sessions.attach(to: monitor)
        case .none:
            logger.warning("--protection none: nothing attached to the monitor (no release, no shedding)")
        }

        let router = Router()
        router.add(middleware: MetricsMiddleware())
        let admission = options.protection == .full ? MemoryAdmission(monitor: monitor) : nil
        if let admission {
            // Bodies are admitted by their declared size (Content-Length), before they are read,
            // against what is left below the critical mark (memwarn's MemoryAdmission), and
            // everything is refused while memory is exhausted.
            router.add(middleware: LoadSheddingMiddleware(monitor: monitor, admission: admission,
                                                          largestBody: Self.largestJob, retryAfterSeconds: options.retryAfterSeconds,
                                                          exemptPaths: ["/healthz", "/metrics", "/status"]))
        }
        let serviceMetrics = ServiceMetrics()
        router.get("/healthz") { _, _ in "ok\n" }
        router.get("/metrics") { _, _ -> Response in
            serviceMetrics.record(renders: renders, jobs: jobs, sessions: sessions)
            // swift-metrics carries no help text: memwarn's families get their `# HELP` lines here.
            let text = MemwarnMetric.addingHelp(to: registry.emitToString())
            return Response(status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                            body: .init(byteBuffer: ByteBuffer(string: text)))
        }
        router.get("/status") { _, _ in
            ServiceStatus(monitor: monitor, admission: admission, renders: renders, jobs: jobs, sessions: sessions)
        }
        router.get("/reports/:id") { request, context -> Response in
            let id = try context.parameters.require("id", as: Int.self)
            if let user = request.uri.queryParameters["user"] {
                try await sessions.session(String(user)).viewed(report: id)
                sweeper.touch(String(user))
            }
            let (page, hit) = try await renders.page(for: id)
            var headers: HTTPFields = [.contentType: "text/html; charset=utf-8"]
            headers[.cacheStatus] = hit ? "hit" : "miss"
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: page))
        }
        router.get("/users/:user/dashboard") { _, context -> Response in
            let user = try context.parameters.require("user")
            let page = try await sessions.session(user).dashboard()
            sweeper.touch(user)
            return Response(status: .ok, headers: [.contentType: "text/html; charset=utf-8"], body: .init(byteBuffer: page))
        }
        router.post("/jobs") { request, _ -> Response in
            // Admitted by its Content-Length (LoadSheddingMiddleware) before any of it was read;
            // read into one buffer of that size.
            let payload = try await request.collectAdmittedBody(upTo: Self.largestJob)
            let position = jobs.enqueue(payload)
            return Response(status: .accepted, headers: [.contentType: "application/json"],
                            body: .init(byteBuffer: ByteBuffer(string: "{\"queued\":\(position)}\n")))
        }

        // The monitor, the sessions and the service's own workers run in the application's
        // ServiceGroup. Hummingbird shuts the server down first on SIGTERM (`memwarn run`
        // forwards it), then these in reverse order: running sessions get `willTerminate`, and
        // the monitor, which releases until then, stops last. Connections read 16 KiB at a time
        // (ReadAheadLimit): what the server holds read ahead of a handler is bounded, and
        // admission reserves it (ReadAhead.swift).
        let app = Application(
            router: router,
            server: .http1(configuration: .init(additionalChannelHandlers: [ReadAheadLimit()])),
            configuration: .init(address: .hostname(options.hostname, port: options.port), serverName: "hummingbird-service"),
            services: [monitor, ControlService(monitor: monitor, logger: logger), sessions, worker, sweeper],
            logger: logger)
        logger.notice("listening on \(options.hostname):\(options.port), protection \(options.protection.rawValue)")
        try await app.runService()
        logger.notice("stopped; \(jobs.count) accepted jobs were still queued")
    }
}

extension HTTPField.Name {
    static let cacheStatus = Self("X-Cache")!
}

/// `bytes` as MiB with one decimal, for the log.
func mebibytes(_ bytes: some BinaryInteger) -> String {
    String(format: "%.1f MiB", Double(bytes) / 1_048_576)
}

struct Options {
    enum Protection: String { case full, releaseOnly = "release-only", none }

    var hostname = "127.0.0.1"
    var port = 8080
    var drainRate = 40
    var renderBytes = 256 << 10
    var retryAfterSeconds = 5
    var protection = Protection.full
    var cacheBudgetBytes: Int?
    var missDelayMilliseconds = 0

    struct Invalid: Error, CustomStringConvertible { var description: String }

    init(_ arguments: ArraySlice<String>) throws {
        var arguments = arguments.makeIterator()
        func value(_ name: String) throws -> String {
            guard let value = arguments.next() else { throw Invalid(description: "\(name) needs a value") }
            return value
        }
        func number(_ name: String, in range: ClosedRange<Int>) throws -> Int {
            guard let number = Int(try value(name)), range.contains(number) else {
                throw Invalid(description: "\(name) takes a whole number in \(range.lowerBound)...\(range.upperBound)")
            }
            return number
        }
        while let argument = arguments.next() {
            switch argument {
            case "--hostname": hostname = try value(argument)
            case "--port": port = try number(argument, in: 0...65535)
            case "--drain-rate": drainRate = try number(argument, in: 1...100_000)
            case "--render-kib": renderBytes = try number(argument, in: 4...65536) << 10
            case "--retry-after": retryAfterSeconds = try number(argument, in: 1...3600)
            case "--cache-budget": cacheBudgetBytes = try number(argument, in: 1...1_048_576) << 20
            case "--miss-delay-ms": missDelayMilliseconds = try number(argument, in: 0...60_000)
            case "--protection":
                let name = try value(argument)
                guard let protection = Protection(rawValue: name) else {
                    throw Invalid(description: "--protection takes full, release-only or none, not \(name)")
                }
                self.protection = protection
            default: throw Invalid(description: "unknown argument \(argument)")
            }
        }
    }
}

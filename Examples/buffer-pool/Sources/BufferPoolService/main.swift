// A render service with a buffer pool of its own (BufferPool.swift), registered as a memwarn
// consumer beside a cache of results. Run it under a limit and soak it:
//
//   memwarn soak --memory-max 64M --duration 30s --ready-after 1s --no-baseline -- buffer-pool-service
//
// The soak's report shows the pool's bytes in use at their peak ("consumers in use"), and what
// each release took from the pool's idle buffers and from the cache.
import Foundation
import Logging
import Memwarn
import ServiceLifecycle

LoggingSystem.bootstrap { StreamLogHandler.standardError(label: $0) }
let logger = Logger(label: "buffer-pool-service")
let policy = try PressurePolicy.load(environment: ProcessInfo.processInfo.environment)
let monitor = PressureMonitor(configuration: MonitorConfiguration(policy: policy), logger: logger)
ReleaseCoordinator.shared.attach(to: monitor)
ReleaseCoordinator.shared.addReportObserver { report in logger.info("\(report)") }

let pool = BufferPool(name: "render-buffers", bufferBytes: 1 << 20)
let results = DiscardableCache<Int, [UInt8]>()
results.name = "render-results"
results.totalCostLimit = 16 << 20  // bounded, as a real cache is: the pool's idle buffers are what pressure finds

let control = ControlService(monitor: monitor, logger: logger)  // `memwarn soak` reads the pool's figures here
let load = RenderLoad(pool: pool, results: results)
let group = ServiceGroup(configuration: .init(services: [monitor, control, load], gracefulShutdownSignals: [.sigterm], logger: logger))
try await group.run()

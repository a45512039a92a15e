// A render service with a buffer pool of its own (BufferPool.swift), registered as a memwarn
// consumer beside a cache of results. Run it under a limit and soak it:
//
//   memwarn soak --memory-max 64M --duration 30s --ready-after 1s --no-baseline -- buffer-pool-service
//
// The soak's report shows the pool's bytes in use at their peak ("consumers in use"), and what
// each release took from the pool's idle buffers and from the cache. `--idle-budget N` keeps at
// most N idle buffers: a fixed budget, as a pool without memwarn would need (the footprint
// benchmark runs it beside memwarn).
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

var maximumIdle = Int.max
var arguments = CommandLine.arguments.dropFirst()
while let argument = arguments.popFirst() {
    guard argument == "--idle-budget", let text = arguments.popFirst(), let count = Int(text), count >= 0 else {
        FileHandle.standardError.write(Data("usage: buffer-pool-service [--idle-budget BUFFERS]\n".utf8))
        exit(2)
    }
    maximumIdle = count
}

let pool = BufferPool(name: "render-buffers", bufferBytes: 1 << 20, maximumIdle: maximumIdle)
let results = DiscardableCache<Int, [UInt8]>()
results.name = "render-results"
results.totalCostLimit = 16 << 20  // bounded, as a real cache is: the pool's idle buffers are what pressure finds

let control = ControlService(monitor: monitor, logger: logger)  // `memwarn soak` reads the pool's figures here
let load = RenderLoad(pool: pool, results: results, logger: logger)
let group = ServiceGroup(configuration: .init(services: [monitor, control, load], gracefulShutdownSignals: [.sigterm], logger: logger))
try await group.run()

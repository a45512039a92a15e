import Logging
import ServiceLifecycle
import Synchronization
import Vapor

/// Runs memwarn's services — the monitor, the policy follower, the control endpoint, and any of
/// the application's own — through Vapor's life cycle.
///
/// Vapor 4 has no `ServiceGroup`: it owns SIGTERM and SIGINT (its `serve` command stops the
/// server on either) and calls its `LifecycleHandler`s around the server instead. This handler
/// bridges the two:
///
/// - `willBootAsync`, before the server accepts a connection: the services start in a
///   `ServiceGroup` of their own, in a task (the group's `run()` returns only when they end). The
///   group gets no signals: Vapor has them, and stops the server first.
/// - `shutdownAsync`, after the server has stopped (`app.asyncShutdown()` calls the handlers in
///   reverse order): graceful shutdown of the group, awaited, so the monitor keeps releasing
///   until the last request is answered; then `afterShutdown` (close the idle database
///   connections, and wait for each close).
///
/// A service that ends or throws while the application runs ends the group (swift-service-
/// lifecycle's default): the failure is logged and Vapor is told to stop, rather than serving on
/// unwatched.
final class MemwarnLifecycle: LifecycleHandler {
    private let group: ServiceGroup
    private let afterShutdown: @Sendable () async -> Void
    private let logger: Logger
    /// The task running the group, from `willBootAsync` to `shutdownAsync`.
    private let running = Mutex<Task<Void, Never>?>(nil)

    init(services: [any Service], afterShutdown: @escaping @Sendable () async -> Void, logger: Logger) {
        group = ServiceGroup(configuration: .init(services: services, logger: logger))
        self.afterShutdown = afterShutdown
        self.logger = logger
    }

    func willBootAsync(_ application: Application) async throws {
        let task = Task { [group, logger] in
            do {
                try await group.run()
            } catch {
                logger.critical("memwarn's services stopped: \(error); stopping the application")
                application.running?.stop()
            }
        }
        running.withLock { $0 = task }
    }

    func shutdownAsync(_ application: Application) async {
        guard let task = running.withLock({ $0.take() }) else { return }
        await group.triggerGracefulShutdown()
        await task.value
        await afterShutdown()
    }
}

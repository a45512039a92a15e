public import ServiceLifecycle

/// The application as a swift-service-lifecycle `Service`: run it in a `ServiceGroup` with
/// `gracefulShutdownSignals: [.sigterm, .sigint]`, and SIGTERM or SIGINT leads to
/// ``LifeCycleApplication/terminate()`` — `willTerminate` for running units under the deadline — and
/// then to the group's clean exit.
extension LifeCycleApplication: Service {
    /// Launches the application if it is not running, waits for graceful shutdown (or
    /// cancellation), then terminates.
    ///
    /// - Throws: ``LifeCycleError`` when the launch fails; the wait and the termination do not
    ///   throw.
    public func run() async throws {
        if state == .notRunning { try await launch() }
        try? await gracefulShutdown()
        let report = await terminate()
        logger.info("terminated", metadata: ["report": "\(report)", "duration": "\(report.duration)"])
    }
}

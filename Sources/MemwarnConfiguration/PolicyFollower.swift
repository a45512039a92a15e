public import Configuration
public import MemwarnMonitor
public import ServiceLifecycle

/// The service that keeps a monitor's policy following a `ConfigReader`
/// (`PressureMonitor.followPolicy(from:refused:)`), for a `ServiceGroup` beside
/// the monitor and the reloading provider; it ends at graceful shutdown.
public struct PolicyFollower: Service {
    private let monitor: PressureMonitor
    private let config: ConfigReader

    /// Follows `config` (scoped to memwarn's keys) for `monitor`.
    ///
    /// - Parameters:
    ///   - monitor: the monitor whose policy follows the configuration.
    ///   - config: the reader, scoped to memwarn's keys (`config.scoped(to: "memwarn")`).
    public init(monitor: PressureMonitor, config: ConfigReader) {
        self.monitor = monitor
        self.config = config
    }

    /// Follows the policy until graceful shutdown or cancellation.
    ///
    /// - Throws: what `PressureMonitor.followPolicy(from:refused:)` throws.
    public func run() async throws {
        try await monitor.followPolicy(from: config)
    }
}

public import Configuration
public import MemwarnMonitor
import ServiceLifecycle

/// A running monitor's policy following apple/swift-configuration.
extension PressureMonitor {
    /// Follows the policy in `config` while the monitor runs: every snapshot its providers
    /// publish — the first at once, then one at each change (a `ReloadingFileProvider` when its
    /// file changes, a `MutableInMemoryProvider` when a value is set) — is read as
    /// `PressurePolicy.init(config:)` and, when it differs
    /// from the running one, applied (`PressureMonitor.apply(policy:)`: the marks
    /// are planned again on every path, the level carries over). A snapshot that does not make a
    /// valid policy is refused: the running policy is kept, the reason logged at error level and
    /// passed to `refused`. Runs until its task is cancelled or, in a `ServiceGroup`, until
    /// graceful shutdown (``PolicyFollower`` runs it there).
    ///
    /// ```swift
    /// let config = ConfigReader(providers: [EnvironmentVariablesProvider(), reloadingFile])
    /// let policy = try PressurePolicy(config: config.scoped(to: "memwarn"))
    /// let monitor = PressureMonitor(configuration: .init(policy: policy), logger: logger)
    /// // in a task of its own, or as PolicyFollower(monitor:config:) in the ServiceGroup:
    /// try await monitor.followPolicy(from: config.scoped(to: "memwarn"))
    /// ```
    ///
    /// - Parameters:
    ///   - config: the reader, scoped to memwarn's keys.
    ///   - refused: called with the error of each snapshot refused.
    /// - Throws: `CancellationError` when cancelled, or what the reader's watch throws.
    public func followPolicy(from config: ConfigReader, refused: @escaping @Sendable (any Error) -> Void = { _ in }) async throws {
        do {
            try await cancelWhenGracefulShutdown { try await self.watchPolicy(in: config, refused: refused) }
        } catch is CancellationError where Task.isShuttingDownGracefully && !Task.isCancelled {
            return  // graceful shutdown: done
        }
    }

    private func watchPolicy(in config: ConfigReader, refused: @escaping @Sendable (any Error) -> Void) async throws {
        try await config.watchSnapshot { updates in
            for try await snapshot in updates {
                do {
                    let policy = try PressurePolicy(config: snapshot)
                    guard policy != configuration.policy else { continue }
                    try apply(policy: policy)
                } catch {
                    logger.error(
                        "memory monitor: the configuration's new policy is refused; the running policy is kept",
                        metadata: ["reason": "\(error)"])
                    refused(error)
                }
            }
        }
    }
}

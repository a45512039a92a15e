import MemwarnRelease

// A policy applied while the monitor runs, and the arming of a session (with the policy the
// monitor has, and the level it carries over).
extension PressureMonitor {
    /// Applies `policy` to the monitor while it runs (or is armed): its marks, sampling, PSI
    /// triggers and growth settings are planned again on every path, as for a new limit, by
    /// arming a new session with it and ending the old one; the level carries over (its hold
    /// time too), and the first reading at the new marks is a ``LevelEvent`` with source
    /// `policy-change` only when it changes the level. A monitor
    /// not armed (a run ended) takes the policy at its next ``run()``.
    ///
    /// - Parameter policy: the new policy.
    /// - Throws: ``PolicyError`` for an inconsistent policy, an error naming the cgroup and file, or
    ///   ``MonitorError`` when the monitor cannot be armed anew: either way nothing changes, the
    ///   running policy is kept.
    public func apply(policy: PressurePolicy) throws {
        try policy.validate()
        try policyChange.withLock { _ in
            let before = configuration
            guard before.policy != policy else { return }
            currentConfiguration.withLock { $0.policy = policy }
            leases.update(policy: policy)
            let armed = state.withLock { state -> MonitorSession? in
                guard !state.stopping else { return nil }
                switch state.phase {
                case .armed(let session), .running(let session): return session
                case .idle, .failedToArm, .disabled: return nil
                }
            }
            guard let armed else { return }
            let replacement: MonitorSession
            do {
                replacement = try arm(carrying: level)
            } catch {
                currentConfiguration.withLock { $0.policy = before.policy }
                leases.update(policy: before.policy)
                throw error
            }
            let swapped = state.withLock { state -> Bool in
                switch state.phase {
                case .armed(let session) where session === armed:
                    state.phase = .armed(replacement)
                case .running(let session) where session === armed && !state.stopping:
                    state.phase = .running(replacement)
                default:
                    return false
                }
                return true
            }
            guard swapped else {
                // The run ended meanwhile: the new session is not wanted.
                replacement.stop()
                return
            }
            armed.stop()
            logger.notice(
                "memory monitor: a new policy applies; its marks are planned again",
                metadata: [
                    "warningRatio": "\(policy.warningRatio)", "criticalRatio": "\(policy.criticalRatio)", "recoveryRatio": "\(policy.recoveryRatio)",
                    "level": "\(level)",
                ])
        }
    }

    /// Arms a new session: blocks until its sources are registered and its first reading taken.
    ///
    /// - Parameter level: the level of the session it replaces (a policy applied while running).
    func arm(carrying level: MemoryPressureLevel? = nil) throws -> MonitorSession {
        let session = try MonitorSession.arm(
            .init(
                configuration: configuration, logger: logger, metrics: metrics, samples: samples,
                output: { [weak self] in EngineOutput(self) },
                coordinators: coordinators,
                exhaustionChanged: { [weak self] change in self?.publish(change) }, leases: leases, carriedLevel: level))
        var arming = session.arming
        state.withLock { state in
            arming.sources = state.sources
            state.arming = arming
            // A session armed for a new policy registers its thresholds anew: sampled until they are in.
            if state.usageWatch == nil || arming.pendingThresholds == 0 || level != nil { state.usageWatch = arming.usageWatch }
        }
        metrics.record(arming)
        logger.notice(
            "memory monitor armed",
            metadata: [
                "in": "\(arming.duration)", "sinceProcessStart": "\(arming.sinceProcessStart.map { "\($0)" } ?? "unknown")",
                "usageWatch": "\(arming.usageWatch)", "pendingThresholds": "\(arming.pendingThresholds)", "sources": "\(arming.sources.count)",
            ])
        return session
    }
}

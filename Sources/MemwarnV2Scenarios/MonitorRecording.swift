import MemwarnMonitor
import MemwarnRelease
import MemwarnSystem
import MemwarnTestKit

/// A ``PressureMonitor`` running on a cgroup for the length of a scenario, every level event
/// it emits recorded with the time it came, so the scenario can wait for changes and assert
/// their levels and sources.
final class MonitorRecording: Sendable {
    /// One event and when it arrived.
    struct Recorded: Sendable {
        let event: LevelEvent
        let arrival: ContinuousClock.Instant
    }

    /// The monitor.
    let monitor: PressureMonitor
    private let recorded = Locked<[Recorded]>([])
    private let running = Locked<Task<Void, Never>?>(nil)
    private let failure = Locked<(any Error)?>(nil)

    /// A monitor of `cgroup` with `policy`, stopped when the scenario ends; ``start(within:)`` runs it.
    init(_ context: ScenarioContext, watching cgroup: TestCgroup, policy: PressurePolicy, watchesPressureStall: Bool = true) {
        var configuration = MonitorConfiguration(policy: policy, cgroupPath: cgroup.location.path)
        configuration.watchesPressureStall = watchesPressureStall
        monitor = PressureMonitor(configuration: configuration, logger: context.logger)
        monitor.addObserver { [recorded] event in
            recorded.withLock { $0.append(Recorded(event: event, arrival: .now)) }
        }
        context.atEnd { [self] in await stop() }
    }

    /// Starts the monitor and waits for its first reading.
    ///
    /// - Returns: the initial event.
    func start(within limit: Duration = .seconds(30)) async throws -> LevelEvent {
        let (monitor, failure) = (self.monitor, self.failure)
        running.withLock {
            $0 = Task {
                do { try await monitor.run() } catch { failure.withLock { $0 = error } }
            }
        }
        return try await event(number: 0, within: limit)
    }

    /// Every event so far, in order.
    var events: [LevelEvent] { recorded.withLock { $0.map(\.event) } }

    /// How many events so far.
    var count: Int { recorded.withLock { $0.count } }

    /// Event `number` (0 is the initial one), waiting for it up to `limit`.
    ///
    /// - Throws: ``ScenarioFailure`` naming the events seen when it did not come.
    func event(number: Int, within limit: Duration) async throws -> LevelEvent {
        try await recordedEvent(number: number, within: limit).event
    }

    /// Event `number` and when it arrived, waiting for it up to `limit`.
    func recordedEvent(number: Int, within limit: Duration) async throws -> Recorded {
        let deadline = ContinuousClock.now + limit
        while true {
            if let found = recorded.withLock({ $0.count > number ? $0[number] : nil }) { return found }
            if let error = failure.withLock({ $0 }) { throw ScenarioFailure("the monitor stopped: \(error)") }
            guard ContinuousClock.now < deadline else { break }
            try await Task.sleep(for: .milliseconds(10))
        }
        throw ScenarioFailure("the monitor did not report event #\(number) within \(limit); it reported: \(events.map(\.summary).joined(separator: ", "))")
    }

    /// The first event after the first `count` ones whose level is `level`.
    func firstEvent(at level: MemoryPressureLevel, after count: Int, within limit: Duration) async throws -> LevelEvent {
        var number = count
        while true {
            let event = try await event(number: number, within: limit)
            if event.level == level { return event }
            number += 1
        }
    }

    /// Waits until the latest event is at `level` (the level has settled there); returns it.
    func latestEvent(at level: MemoryPressureLevel, within limit: Duration) async throws -> LevelEvent {
        let deadline = ContinuousClock.now + limit
        while ContinuousClock.now < deadline {
            if let latest = events.last, latest.level == level { return latest }
            try await Task.sleep(for: .milliseconds(10))
        }
        throw ScenarioFailure("the level did not settle at \(level) within \(limit); events: \(events.map(\.summary).joined(separator: ", "))")
    }

    /// Stops the monitor and waits until `run()` has returned.
    func stop() async {
        guard let task = running.withLock({ $0 }) else { return }
        task.cancel()
        await task.value
    }
}

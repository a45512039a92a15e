import Logging
import MemwarnSystem

/// The sources a ``SourcePlan`` made, registered on the monitor's loop: each descriptor watched
/// (on, no more, or paused while it floods), the periodic ones drained together every period.
/// Confined to the loop thread; what a firing means is the engine's.
final class WatchedSources {
    private let loop: EventLoop
    private let logger: Logger
    /// The sources, with their registrations (`nil`: periodic, or no longer watched).
    private var sources: [(source: any PressureSource, registration: EventLoop.Registration?)] = []

    init(loop: EventLoop, logger: Logger) {
        self.loop = loop
        self.logger = logger
    }

    /// Registers `sources`: `fired` is called when a descriptor fires, `drainPeriodic` with the
    /// periodic sources of one period at every period, for as long as it returns `true`.
    ///
    /// - Throws: ``SystemError`` from `epoll_ctl` (the sources registered before stay, to be torn down).
    func register(
        _ sources: [any PressureSource], fired: @escaping (any PressureSource, EpollEvents) -> Void,
        drainPeriodic: @escaping ([any PressureSource]) -> Bool
    ) throws(SystemError) {
        var periods: [Duration: [any PressureSource]] = [:]
        for source in sources {
            do {
                let registration = try source.register(on: loop) { [unowned source] events in fired(source, events) }
                self.sources.append((source, registration))
            } catch {
                self.sources.append((source, nil))
                throw error
            }
            if let period = source.period { periods[period, default: []].append(source) }
        }
        for (period, group) in periods { schedulePoll(group, every: period, drainPeriodic) }
    }

    private func schedulePoll(_ group: [any PressureSource], every period: Duration, _ drainPeriodic: @escaping ([any PressureSource]) -> Bool) {
        loop.schedule(at: loop.now + period) { [unowned self] in
            if drainPeriodic(group) { schedulePoll(group, every: period, drainPeriodic) }
        }
    }

    /// Watches a source as its drain asked: on, no more, or paused for a while (a flood). A source
    /// not registered here (a usage threshold, the planner's) is left as it is.
    func watch(_ source: any PressureSource, as followUp: PressureSourceFollowUp) {
        switch followUp {
        case .keepWatching:
            return  // the common case: no search
        case .stopWatching:
            stopWatching(source)
        case .pause(let quiet):
            guard let registration = sources.first(where: { $0.source === source })?.registration else { return }
            do {
                try loop.pause(registration, for: quiet) { [logger, description = source.description] error in
                    logger.warning("a paused source could not be watched again", metadata: ["source": "\(description)", "error": "\(error)"])
                }
            } catch {
                // Not paused: it goes on firing, which costs readings, not correctness.
                logger.debug("a flooding source could not be paused", metadata: ["source": "\(source.description)", "error": "\(error)"])
            }
        }
    }

    /// Stops watching a source (it went away); it is torn down with the others.
    func stopWatching(_ source: any PressureSource) {
        guard let index = sources.firstIndex(where: { $0.source === source }), let registration = sources[index].registration else { return }
        loop.unwatch(registration)
        sources[index].registration = nil
    }

    /// Unwatches and closes every source. Loop thread.
    func tearDown() {
        for (source, registration) in sources {
            if let registration { loop.unwatch(registration) }
            source.tearDown()
        }
        sources = []
    }
}

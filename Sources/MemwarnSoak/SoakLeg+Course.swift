import Foundation
import MemwarnSystem

/// A leg's course from its launch until whatever ended it: the verdict's facts, and what the
/// stop and the report need.
struct LegCourse {
    /// What the leg knew when it began to stop its service.
    var facts: LegStopFacts
    /// Seconds from the start until the service was ready (`nil`: it never was).
    var readyAfter: Double?
    /// The load, when one started.
    var load: WaitedChild?
    /// Seconds from the start until the soak began to stop the service.
    var stoppedAt: Double
    /// What stalled on memory from ready until then.
    var stall: MemoryStall?
}

extension SoakLeg {
    /// Waits for the service to be ready (the demo is at once), starts its load and the
    /// duration's timer, and waits for whatever ends the leg first.
    ///
    /// - Parameters:
    ///   - launched: the leg's started service.
    ///   - end: fired with whatever ends the leg.
    ///   - shells: where the load starts.
    ///   - readySeconds: set when the service is ready.
    func carryOut(
        _ launched: LaunchedLeg, end: OneTimeEvent<Reason>, shells: LegShells, readySeconds: Locked<Double?>
    ) async -> LegCourse {
        let (run, start) = (launched.run, launched.start)
        var readyAfter: Double?
        var setupFailure: LegSetupFailure?
        var load: WaitedChild?
        var loadStarted: ContinuousClock.Instant?
        var reason: Reason?
        var timers: [Task<Void, Never>] = []
        defer { for timer in timers { timer.cancel() } }
        // When `--duration` is due (from ready on), for a service that ends by itself near it.
        var durationDue: ContinuousClock.Instant?
        let cgroupDirectory = run.cgroup.location.directory
        var stallAtReady: MemoryStall.Reading?
        if let service = launched.service {
            switch await ready(service, end: end, start: start) {
            case .success(let seconds):
                readyAfter = seconds
                readySeconds.withLock { $0 = seconds }
                stallAtReady = MemoryStall.read(cgroupDirectory: cgroupDirectory)
            case .failure(let notReady):
                if case .interrupted? = end.value {
                    reason = end.value  // Ctrl-C while waiting: a report of what ran, not a setup error
                } else {
                    setupFailure = .notReady(notReady.description, endedBeforeReady: end.value == .serviceExited)
                    reason = end.value ?? .duration  // not ready in time: stopped like a run whose time is up
                }
            }
            if reason == nil {
                durationDue = .now + soak.duration
                timers.append(
                    Task {
                        try? await Task.sleep(for: soak.duration)
                        end.fire(.duration)
                    })
                if let command = service.load {
                    do {
                        let started = try shells.start(command)
                        (load, loadStarted) = (started, .now)
                        Task { end.fire(.loadEnded((await started.exit()).code)) }
                    } catch {
                        setupFailure = .loadCouldNotStart("the load command could not start: \(error)")
                        reason = .loadEnded(127)
                    }
                }
            }
        } else {
            readyAfter = 0
            stallAtReady = MemoryStall.read(cgroupDirectory: cgroupDirectory)
            // The demo ends itself after its load; a demo that hangs is stopped two minutes later.
            timers.append(
                Task {
                    try? await Task.sleep(for: soak.duration + .seconds(120))
                    end.fire(.duration)
                })
        }
        if reason == nil { reason = await end.wait(for: nil) }
        // A service that is gone by now ended by itself, whatever fired first (its load may
        // have seen it die before the soak did): it did not last to the end.
        let serviceEnded = run.hasEnded
        let facts = LegStopFacts(
            commandName: launched.commandName, isCommand: launched.service != nil, loadCommand: launched.service?.load, limitBytes: limit,
            reason: serviceEnded ? .serviceExited : reason ?? .serviceExited, serviceEnded: serviceEnded, setupFailure: setupFailure,
            loadRan: loadStarted.map { ContinuousClock.now - $0 }, durationDueSeconds: durationDue.map { ($0 - start).seconds },
            finishWindow: finishWindow)
        return LegCourse(
            facts: facts, readyAfter: readyAfter, load: load, stoppedAt: (ContinuousClock.now - start).seconds,
            stall: MemoryStall(from: stallAtReady, to: MemoryStall.read(cgroupDirectory: cgroupDirectory)))
    }

    /// Why the service never became ready.
    struct NotReady: Error, CustomStringConvertible {
        var description: String
    }

    /// Waits until the service is ready: its URL answers 2xx, or the wait is over.
    private func ready(_ service: Soak.Service, end: OneTimeEvent<Reason>, start: ContinuousClock.Instant) async -> Result<Double, NotReady> {
        let name = service.command.first ?? ""
        func ended() -> NotReady? {
            switch end.value {
            case .serviceExited?: NotReady(description: "\(name) ended before it was ready")
            case .interrupted(let signal)?: NotReady(description: "interrupted by signal \(signal) before \(name) was ready")
            default: nil
            }
        }
        switch service.readiness {
        case .after(let wait):
            _ = await end.wait(for: wait)
            if let ended = ended() { return .failure(ended) }
            return .success((ContinuousClock.now - start).seconds)
        case .url(let text, let timeout):
            guard case .success(let address) = HTTPGet.Address.parse(text) else {
                return .failure(NotReady(description: "--ready-url \(text) is not an http:// URL"))
            }
            let deadline = start + timeout
            var lastFailure = "no answer yet"
            while true {
                if let ended = ended() { return .failure(ended) }
                do {
                    let response = try HTTPGet.get(address, timeout: .seconds(1))
                    if (200..<300).contains(response.status) { return .success((ContinuousClock.now - start).seconds) }
                    lastFailure = "it answered \(response.status)"
                } catch {
                    lastFailure = "\(error)"
                }
                if ContinuousClock.now >= deadline {
                    return .failure(
                        NotReady(
                            description: "\(name) did not answer \(text) with 2xx within \(String(format: "%g", timeout.seconds)) s (last: \(lastFailure))"))
                }
                _ = await end.wait(for: .milliseconds(100))
            }
        }
    }
}

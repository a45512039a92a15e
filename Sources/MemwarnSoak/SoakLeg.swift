import CgroupKit
import Foundation
import Logging
import Memwarn
import MemwarnSystem

/// One run of a soak: the service under one limit, with memwarn or without, its load beside
/// it, until the duration runs out, the load ends, the service ends, or the soak is interrupted;
/// then the check, the service and the load stopped, and the figures gathered.
struct SoakLeg {
    let soak: Soak
    let memwarnEnabled: Bool
    let limit: UInt64
    let logger: Logger

    var label: String { memwarnEnabled ? "memwarn" : "baseline" }

    /// Why the run is ending.
    enum Reason: Sendable, Equatable {
        case serviceExited
        case loadEnded(Int32)
        case duration
        case interrupted(Int32)
    }

    /// How long a stopped service and load get before SIGKILL.
    static let stopGrace = Duration.seconds(10)
    /// A load that fails within this long of its start failed at once.
    static let loadStartGrace = Duration.seconds(3)
    /// `/dev/null`, the standard input of the service, its load and its check: in process groups
    /// of their own, a read of the terminal would stop them (SIGTTIN).
    static let nullInput: Int32 = (try? FileDescriptor.open("/dev/null", O_RDONLY).take()) ?? -1

    /// How long `--check` may take.
    static let checkTimeout = Duration.seconds(300)

    /// How long before `--duration` is due a service may end by itself, with status 0, and have
    /// run to the end (``SoakRun/End/finished``): the stop's grace (``stopGrace``), or a tenth of
    /// the duration when that is shorter.
    var finishWindow: Duration { min(Self.stopGrace, soak.duration / 10) }

    func run(
        interruption: SoakInterruption, progress: @escaping @Sendable (Soak.Progress) -> Void,
        live: @escaping @Sendable ((@Sendable () -> SoakRun)?) -> Void
    ) async throws -> SoakRun {
        // The demo's files go in a fresh private folder (mkdtemp, 0700), removed afterwards: a
        // run that is OOM-killed cannot clean up after itself.
        var dataDirectory: String?
        defer { if let dataDirectory { try? FileManager.default.removeItem(atPath: dataDirectory) } }
        var environment = ProcessInfo.processInfo.environment
        environment[MonitorConfiguration.disableVariable] = memwarnEnabled ? "0" : "1"
        environment["MEMWARN_SOAK_RUN"] = label
        let command: [String]
        let service: Soak.Service?
        switch soak.subject {
        case .demo(let path):
            do {
                dataDirectory = try PrivateDirectory.makeTemporary(prefix: "memwarn-soak-\(label)")
            } catch {
                throw ConstrainedRun.StartError(.setupFailed, description: "the demo's data folder: \(error)")
            }
            command = [path, "--duration", String(soak.duration.seconds), "--data-dir", dataDirectory ?? ""] + (memwarnEnabled ? [] : ["--no-memwarn"])
            service = nil
        case .command(let given):
            command = given.command
            service = given
        }
        let (label, limit) = (self.label, self.limit)
        func options(standardOutput: Int32?) -> ConstrainedRun.Options {
            var options = ConstrainedRun.Options(
                command: command, memoryMaxBytes: limit, environment: environment, policy: soak.policy,
                sampleInterval: soak.sampleInterval, standardOutput: standardOutput,
                standardError: service?.outputDescriptor, namePrefix: "memwarn-soak")
            // Its own process group: the terminal's Ctrl-C reaches the soak, which stops the service
            // (SIGTERM to the group: a wrapper script's children too), not the service directly.
            options.standardInput = Self.nullInput
            options.newProcessGroup = true
            return options
        }
        let run: ConstrainedRun
        let lines: LineStream?
        if service == nil {
            // The demo's event lines, read from a pipe: closed here once the demo holds its copy.
            let output: PipeEnds
            do {
                output = try PipeEnds()
            } catch {
                throw ConstrainedRun.StartError(.setupFailed, description: "the demo's output: \(error)")
            }
            run = try ConstrainedRun(options(standardOutput: output.writeEnd.rawValue), logger: logger)
            do {
                lines = try LineStream(reading: output.keepingReadEnd(), name: "memwarn-soak-out")
            } catch {
                run.forward(signal: SIGKILL)
                _ = await run.wait()
                throw ConstrainedRun.StartError(.setupFailed, description: "the demo's output: \(error)")
            }
        } else {
            // The service's output goes to the log, or to stderr: stdout is the report's.
            run = try ConstrainedRun(options(standardOutput: service?.outputDescriptor ?? 2), logger: logger)
            lines = nil
        }
        let start = ContinuousClock.now
        let end = LegEnd<Reason>()
        interruption.onInterrupt { end.fire(.interrupted($0)) }

        let metrics = service.flatMap { service in
            service.metricsURL.flatMap { try? HTTPGet.Address.parse($0).get() } ?? service.readyAddress?.with(path: "/metrics")
        }
        let watch = ServiceWatch(
            cgroup: run.cgroup, start: start, metrics: metrics, shedCounterNames: service?.shedCounters ?? [],
            requestCounterNames: service?.requestCounters ?? [])
        do {
            try watch.startPolling()
        } catch {
            run.forward(signal: SIGKILL)
            _ = await run.wait()
            throw ConstrainedRun.StartError(.setupFailed, description: "the soak's watch of the service: \(error)")
        }
        let level = Locked(MemoryPressureLevel.normal)
        let samples = Locked<[SoakSample]>([])
        let changes = Locked<[ConstrainedRunReport.LevelChange]>([])
        let trendLine = Locked<(at: Double, text: String?)>((0, nil))
        let readySeconds = Locked<Double?>(service == nil ? 0 : nil)
        let waiting = Task {
            await run.wait(
                onLevel: { event in
                    level.withLock { $0 = event.level }
                    let seconds = (ContinuousClock.now - start).seconds
                    changes.withLock { $0.append(.init(seconds: seconds, level: event.level.rawValue, usageBytes: event.snapshot.usageBytes)) }
                },
                onSample: { sample in
                    samples.withLock { $0.append(sample) }
                    let figures = watch.current
                    let trend = trendLine.withLock { last -> String? in
                        guard sample.seconds - last.at >= 5 else { return last.text }
                        let since = readySeconds.withLock { $0 } ?? sample.seconds
                        let trend = Self.trend(
                            of: figures, levelChanges: changes.withLock { $0 }, from: since, until: sample.seconds, limitBytes: limit)
                        last = (sample.seconds, trend.verdict == .tooShort ? nil : trend.verdict.rawValue)
                        return last.text
                    }
                    progress(
                        Soak.Progress(
                            label: label, memoryMaxBytes: limit, seconds: sample.seconds, usageBytes: sample.usageBytes,
                            level: level.withLock { $0 }, releases: figures.linksMemwarn ? figures.releases : nil, trend: trend))
                })
        }
        Task {
            _ = await waiting.value
            end.fire(.serviceExited)
        }
        let commandName = command.first ?? ""
        live { [run] in
            let seconds = (ContinuousClock.now - start).seconds
            let figures = watch.current
            return SoakRun(
                label: label, memwarnEnabled: self.memwarnEnabled, memoryMaxBytes: limit,
                run: .inProgress(
                    command: command, cgroup: run.cgroup.location.path, memoryMaxBytes: limit, seconds: seconds,
                    samples: samples.withLock { $0 }, levelChanges: changes.withLock { $0 }),
                demo: nil, service: figures,
                trend: Self.trend(
                    of: figures, levelChanges: changes.withLock { $0 }, from: readySeconds.withLock { $0 } ?? seconds, until: seconds,
                    limitBytes: limit),
                end: .duration)
        }
        defer { live(nil) }

        // Ready?
        var problem: String?
        var runEnd = SoakRun.End.serviceExited
        var readyAfter: Double?
        var load: WaitedChild?
        var loadStarted = ContinuousClock.now
        var reason: Reason?
        var endedBeforeReady = false
        var timers: [Task<Void, Never>] = []
        defer { for timer in timers { timer.cancel() } }
        // When `--duration` is due (from ready on), for a service that ends by itself near it.
        var durationDue: ContinuousClock.Instant?
        // The load's and the check's cgroup, made with the first of them: what they start is
        // killed with it at the end, or by the next run's start when this soak is killed.
        var helper: HelperCgroup?
        defer { helper?.remove() }
        func shell(_ command: String, service: Soak.Service) throws -> WaitedChild {
            let cgroup = try helper ?? HelperCgroup(beside: run)
            helper = cgroup
            return try startShell(command, service: service, environment: environment, pid: run.pid, in: cgroup)
        }
        let cgroupDirectory = run.cgroup.location.directory
        var stallAtReady: StallFigures.Reading?
        if let service {
            switch await ready(service, run: run, end: end, start: start) {
            case .success(let seconds):
                readyAfter = seconds
                readySeconds.withLock { $0 = seconds }
                stallAtReady = StallFigures.read(cgroupDirectory: cgroupDirectory)
            case .failure(let notReady):
                if case .interrupted? = end.reason {
                    reason = end.reason  // Ctrl-C while waiting: a report of what ran, not a setup error
                } else {
                    problem = notReady.description
                    runEnd = .notReady
                    endedBeforeReady = end.reason == .serviceExited
                    reason = end.reason ?? .duration  // not ready in time: stopped like a run whose time is up
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
                        load = try shell(command, service: service)
                        loadStarted = .now
                        Task { [load] in
                            guard let load else { return }
                            end.fire(.loadEnded((await load.exit()).code))
                        }
                    } catch {
                        problem = "the load command could not start: \(error)"
                        runEnd = .loadFailed
                        reason = .loadEnded(127)
                    }
                }
            }
        } else {
            readyAfter = 0
            stallAtReady = StallFigures.read(cgroupDirectory: cgroupDirectory)
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
        let ending = run.hasEnded ? .serviceExited : reason ?? .serviceExited
        let stoppedAt = (ContinuousClock.now - start).seconds
        let stall = StallFigures(from: stallAtReady, to: StallFigures.read(cgroupDirectory: cgroupDirectory))

        // The load failing at once is a broken setup, not a result.
        if case .loadEnded(let code) = ending, code != 0, problem == nil, !run.hasEnded, ContinuousClock.now - loadStarted < Self.loadStartGrace {
            problem =
                "the load command failed at once: it exited with status \(code) within \(Self.loadStartGrace.seconds) s of its start (`\(service?.load ?? "")`)"
            runEnd = .loadFailed
        }
        if problem == nil {
            switch ending {
            case .serviceExited: runEnd = .serviceExited
            case .loadEnded: runEnd = .loadEnded
            case .duration: runEnd = .duration
            case .interrupted: runEnd = .interrupted
            }
        }

        // The check, while the service still runs.
        var checkExitCode: Int32?
        if let check = service?.check, problem == nil, ending != .serviceExited, !run.hasEnded {
            if case .interrupted = ending {
            } else if let service {
                checkExitCode = await runCheck(interruption: interruption) { try shell(check, service: service) }
            }
        }
        // Stop the service, then the load.
        var killedAtStop = false
        if !run.hasEnded {
            run.forward(signal: SIGTERM)
            if await waitForCommand(run, timeout: Self.stopGrace) == nil {
                run.forward(signal: SIGKILL)
                killedAtStop = true
            }
        }
        if let load {
            load.signalGroup(SIGTERM)
            if load.exitIfEnded == nil, await waitForExit(load, timeout: Self.stopGrace) == nil { load.signalGroup(SIGKILL) }
            _ = await load.exit()
            load.signalGroup(SIGKILL)  // what the load left running in its group
        }
        let report = await waiting.value
        watch.stop()
        var demo: DemoRecord?
        if let lines {
            var record = DemoRecord()
            for line in await lines.remainingLines() { record.read(line) }
            demo = record
        }
        let figures = watch.current
        if service != nil, runEnd == .serviceExited, report.oomKills == 0, report.exitCode == 0, problem == nil {
            // Near the end (or after it, before the soak stopped it), ending by itself is as good
            // as being stopped then: an outcome, not bad input.
            let due = durationDue.map { ($0 - start).seconds }
            if let due, report.durationSeconds >= due - finishWindow.seconds {
                runEnd = .finished
            } else {
                problem =
                    "\(commandName) exited with status 0 after \(String(format: "%.1f", report.durationSeconds)) s, "
                    + (due.map { "\(String(format: "%.1f", $0 - report.durationSeconds)) s before the soak's end" } ?? "before it was ready")
                    + ": a soaked service must run until it is stopped (or give --duration that ends first)"
            }
        }
        if runEnd == .notReady, report.oomKills > 0 {
            problem = "\(commandName) was OOM-killed before it was ready: \(ByteSize.describe(limit)) is below what it needs to start"
        } else if endedBeforeReady {
            problem =
                "\(commandName) exited with \(report.exit.signal.map { "signal \($0)" } ?? "status \(report.exitCode)") "
                + "\(String(format: "%.1f", report.durationSeconds)) s after it started, before it was ready: a soaked service must run until it is stopped"
        }
        var soakRun = SoakRun(
            label: label, memwarnEnabled: memwarnEnabled, memoryMaxBytes: limit, run: report, demo: demo, service: figures,
            trend: Self.trend(of: figures, levelChanges: report.levelChanges, from: readyAfter ?? 0, until: stoppedAt, limitBytes: limit),
            end: runEnd, readyAfterSeconds: readyAfter, loadExitCode: load?.exitIfEnded?.code, checkExitCode: checkExitCode,
            problem: problem, killedAtStop: killedAtStop, stall: stall)
        soakRun.cost = SurvivalCost.of(figures, from: readyAfter ?? 0, until: stoppedAt)
        return soakRun
    }

    /// Why the service never became ready.
    struct NotReady: Error, CustomStringConvertible {
        var description: String
    }

    /// Waits until the service is ready: its URL answers 2xx, or the wait is over.
    private func ready(_ service: Soak.Service, run: ConstrainedRun, end: LegEnd<Reason>, start: ContinuousClock.Instant) async -> Result<Double, NotReady> {
        let name = service.command.first ?? ""
        func ended() -> NotReady? {
            switch end.reason {
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

    /// `/bin/sh -c command`, outside the limited cgroup (in `cgroup`, which has no limit of its
    /// own), leading its own process group, with the soak's variables.
    private func startShell(
        _ command: String, service: Soak.Service, environment: [String: String], pid: Int32, in cgroup: HelperCgroup
    ) throws -> WaitedChild {
        var environment = environment
        environment["MEMWARN_SOAK_URL"] = service.readyAddress?.origin ?? ""
        environment["MEMWARN_SOAK_PID"] = String(pid)
        environment.removeValue(forKey: MonitorConfiguration.disableVariable)
        var spawn = ChildSpawn(["/bin/sh", "-c", command], environment: environment.map { "\($0.key)=\($0.value)" })
        spawn.standardInput = Self.nullInput
        spawn.standardOutput = service.outputDescriptor ?? 2
        spawn.standardError = service.outputDescriptor ?? 2
        spawn.newProcessGroup = true
        spawn.parentDeathSignal = SIGKILL
        spawn.cgroupProcsFile = cgroup.procsFile
        return try WaitedChild(spawn)
    }

    /// Runs `--check`, started by `start`; its exit status (127 when it could not start, 124 when
    /// it ran over ``checkTimeout`` and was killed). An interruption ends it (SIGTERM to its group).
    private func runCheck(interruption: SoakInterruption, start: () throws -> WaitedChild) async -> Int32 {
        guard let check = try? start() else { return 127 }
        interruption.onInterrupt { _ in check.signalGroup(SIGTERM) }
        defer { check.signalGroup(SIGKILL) }  // what the check left running in its group
        if await waitForExit(check, timeout: Self.checkTimeout) == nil {
            check.signalGroup(SIGKILL)
            _ = await check.exit()
            return 124
        }
        return (await check.exit()).code
    }

    /// Waits for the service's own process (not the run's teardown) to end, at most `timeout`.
    private func waitForCommand(_ run: ConstrainedRun, timeout: Duration) async -> ProcessExit? {
        let done = LegEnd<ProcessExit>()
        Task { done.fire(await run.commandExit()) }
        return await done.wait(for: timeout)
    }

    /// The trend of the loaded service: from ready until the soak began to stop it (not its
    /// start-up, its check or its shutdown). Without the consumers' footprint (no control
    /// endpoint answered), the falls of its anonymous memory under pressure are counted: they
    /// make the floor unknowable from outside.
    static func trend(
        of figures: ServiceFigures, levelChanges: [ConstrainedRunReport.LevelChange], from ready: Double, until stop: Double, limitBytes: UInt64
    ) -> MemoryTrend {
        let basis = figures.linksMemwarn ? "anonymous memory less the consumers' footprint" : "anonymous memory"
        let falls =
            figures.linksMemwarn
            ? nil
            : MemoryTrend.fallsUnderPressure(
                figures.floorSamples.filter { $0.seconds >= ready && $0.seconds < stop }, levelChanges: levelChanges, limitBytes: limitBytes)
        return MemoryTrend.analyse(
            loadedSamples(figures.floorSamples, from: ready, until: stop), spanSeconds: max(0, stop - ready), limitBytes: limitBytes, basis: basis,
            fallsUnderPressure: falls)
    }

    /// The floor samples of the loaded service: from ready until the soak began to stop it,
    /// their times counted from ready.
    static func loadedSamples(_ samples: [MemoryTrend.Sample], from ready: Double, until stop: Double) -> [MemoryTrend.Sample] {
        samples.filter { $0.seconds >= ready && $0.seconds < stop }.map { sample in
            var shifted = sample
            shifted.seconds -= ready
            return shifted
        }
    }

    private func waitForExit(_ child: WaitedChild, timeout: Duration) async -> ProcessExit? {
        let done = LegEnd<ProcessExit>()
        Task { done.fire(await child.exit()) }
        return await done.wait(for: timeout)
    }
}

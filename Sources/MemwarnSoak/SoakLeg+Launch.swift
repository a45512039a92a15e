import CgroupKit
import Foundation
import MemwarnMonitor
import MemwarnSystem

/// A leg's service started in its limited cgroup, with what reads it: the demo's event lines, and
/// the watch of the service's own figures.
struct LaunchedLeg: Sendable {
    let run: ConstrainedRun
    /// The command run (the demo with its arguments, or the user's).
    let command: [String]
    /// The service's environment: the soak's variables, and memwarn turned off for the baseline.
    let environment: [String: String]
    /// The user's service (`nil`: the demo).
    let service: Soak.Service?
    /// The demo's event lines (`nil` for a command).
    let lines: LineStream?
    let watch: ServiceWatch
    /// When the leg began, once its service started: the origin of its seconds.
    let start: ContinuousClock.Instant

    /// The service's name in sentences: its command's first word.
    var commandName: String { command.first ?? "" }

    /// The demo's record, read from what is left of its lines (`nil` for a command).
    func demoRecord() async -> DemoRecord? {
        guard let lines else { return nil }
        var record = DemoRecord()
        for line in await lines.remainingLines() { record.read(line) }
        return record
    }
}

extension SoakLeg {
    /// The demo's data folder, fresh and private (mkdtemp, 0700); `nil` for a command.
    ///
    /// - Throws: ``ConstrainedRun/StartError`` when it cannot be made.
    func makeDataDirectory() throws -> String? {
        guard case .demo = soak.subject else { return nil }
        do {
            return try PrivateDirectory.makeTemporary(prefix: "memwarn-soak-\(label)")
        } catch {
            throw ConstrainedRun.StartError(.setupFailed, description: "the demo's data folder: \(error)")
        }
    }

    /// Starts the service in its limited cgroup (its output to the demo's line stream, or where
    /// the user said), and the watch of its own figures.
    ///
    /// - Parameter dataDirectory: the demo's data folder (``makeDataDirectory()``).
    /// - Throws: ``ConstrainedRun/StartError`` or `CgroupError` when it cannot start; the run is
    ///   killed and reaped first when what reads it cannot be made.
    func launch(dataDirectory: String?) async throws -> LaunchedLeg {
        var environment = ProcessInfo.processInfo.environment
        environment[MonitorConfiguration.disableVariable] = memwarnEnabled ? "0" : "1"
        environment["MEMWARN_SOAK_RUN"] = label
        let command: [String]
        let service: Soak.Service?
        switch soak.subject {
        case .demo(let path):
            command =
                [path, "--duration", String(soak.duration.seconds), "--data-dir", dataDirectory ?? ""] + (memwarnEnabled ? [] : ["--no-memwarn"])
            service = nil
        case .command(let given):
            command = given.command
            service = given
        }
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
                await Self.abandon(run)
                throw ConstrainedRun.StartError(.setupFailed, description: "the demo's output: \(error)")
            }
        } else {
            // The service's output goes to the log, or to stderr: stdout is the report's.
            run = try ConstrainedRun(options(standardOutput: service?.outputDescriptor ?? 2), logger: logger)
            lines = nil
        }
        let start = ContinuousClock.now
        let metrics = service.flatMap { service in
            service.metricsURL.flatMap { try? HTTPGet.Address.parse($0).get() } ?? service.readyAddress?.with(path: "/metrics")
        }
        let watch = ServiceWatch(
            cgroup: run.cgroup, limitBytes: limit, start: start, metrics: metrics, shedCounterNames: service?.shedCounters ?? [],
            requestCounterNames: service?.requestCounters ?? [])
        do {
            try watch.startPolling()
        } catch {
            await Self.abandon(run)
            throw ConstrainedRun.StartError(.setupFailed, description: "the soak's watch of the service: \(error)")
        }
        return LaunchedLeg(run: run, command: command, environment: environment, service: service, lines: lines, watch: watch, start: start)
    }

    /// Kills a run whose leg cannot go on, and waits until its cgroup is gone.
    private static func abandon(_ run: ConstrainedRun) async {
        run.forward(signal: SIGKILL)
        _ = await run.wait()
    }
}

import CgroupKit
import Foundation
import Logging
import MemwarnSystem

/// One run of a soak: the service under one limit, with memwarn or without, its load beside
/// it, until the duration runs out, the load ends, the service ends, or the soak is interrupted;
/// then the check, the service and the load stopped, and the figures gathered.
///
/// In parts: the launch (``launch(dataDirectory:)``), the course up to whatever ends it
/// (``carryOut(_:end:shells:readySeconds:)``), the stop (``stop(_:load:)``) and the verdict
/// (``LegVerdict``, pure), with the run's ``RunRecorder`` the one store of what it saw.
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
        let dataDirectory = try makeDataDirectory()
        defer { if let dataDirectory { try? FileManager.default.removeItem(atPath: dataDirectory) } }
        let launched = try await launch(dataDirectory: dataDirectory)
        let end = OneTimeEvent<Reason>()
        interruption.onInterrupt { end.fire(.interrupted($0)) }
        let readySeconds = Locked<Double?>(launched.service == nil ? 0 : nil)
        let onSample = progressReporter(launched, readySeconds: readySeconds, progress: progress)
        let waiting = Task { await launched.run.wait(onSample: onSample) }
        Task {
            _ = await waiting.value
            end.fire(.serviceExited)
        }
        live(liveRun(launched, readySeconds: readySeconds))
        defer { live(nil) }

        // The load's and the check's cgroup, made with the first of them: what they start is
        // killed with it at the end, or by the next run's start when this soak is killed.
        let shells = LegShells(beside: launched.run, service: launched.service, environment: launched.environment)
        defer { shells.remove() }
        let course = await carryOut(launched, end: end, shells: shells, readySeconds: readySeconds)
        let stopping = LegVerdict(stopping: course.facts)

        // The check, while the service still runs.
        var checkExitCode: Int32?
        if let check = launched.service?.check, stopping.problem == nil, !launched.run.hasEnded {
            switch course.facts.reason {
            case .serviceExited, .interrupted: break
            case .loadEnded, .duration: checkExitCode = await runCheck(interruption: interruption) { try shells.start(check) }
            }
        }
        let killedAtStop = await stop(launched.run, load: course.load)
        let report = await waiting.value
        launched.watch.stop()
        let demo = await launched.demoRecord()
        let telemetry = launched.watch.current
        let verdict = LegVerdict(course.facts, exit: report)
        let (readyAfter, stoppedAt) = (course.readyAfter ?? 0, course.stoppedAt)
        var soakRun = SoakRun(
            label: label, memwarnEnabled: memwarnEnabled, memoryMaxBytes: limit, run: report, demo: demo, service: telemetry,
            trend: .ofLoadedService(telemetry, levelChanges: report.levelChanges, from: readyAfter, until: stoppedAt, limitBytes: limit),
            end: verdict.end, readyAfterSeconds: course.readyAfter, loadExitCode: course.load?.exitIfEnded?.code, checkExitCode: checkExitCode,
            problem: verdict.problem, killedAtStop: killedAtStop, stall: course.stall)
        soakRun.cost = SurvivalCost.of(telemetry, from: readyAfter, until: stoppedAt)
        return soakRun
    }
}

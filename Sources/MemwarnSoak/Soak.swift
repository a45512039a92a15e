import Foundation
import MemwarnSystem
public import Logging
public import Memwarn

/// `memwarn soak`: the demo service run under the same memory limit twice — with memwarn, and
/// without it (the baseline) — each in its own cgroup through ``ConstrainedRun``, sampled for
/// the plot, its own events read from its output.
public struct Soak: Sendable {
    public var demoPath: String
    public var memoryMaxBytes: UInt64
    public var duration: Duration
    public var includesBaseline: Bool
    public var sampleInterval: Duration
    public var policy: PressurePolicy

    public init(demoPath: String, memoryMaxBytes: UInt64, duration: Duration, includesBaseline: Bool = true,
                sampleInterval: Duration = .milliseconds(100), policy: PressurePolicy = PressurePolicy()) {
        self.demoPath = demoPath
        self.memoryMaxBytes = memoryMaxBytes
        self.duration = duration
        self.includesBaseline = includesBaseline
        self.sampleInterval = sampleInterval
        self.policy = policy
    }

    /// What the live progress line shows.
    public struct Progress: Sendable {
        public var label: String
        public var seconds: Double
        public var usageBytes: UInt64
        public var level: MemoryPressureLevel
    }

    /// Runs the demo with memwarn, then the baseline.
    public func run(logger: Logger, progress: @escaping @Sendable (Progress) -> Void) async throws -> SoakReport {
        var runs = [try await runDemo(memwarnEnabled: true, logger: logger, progress: progress)]
        if includesBaseline { runs.append(try await runDemo(memwarnEnabled: false, logger: logger, progress: progress)) }
        return SoakReport(memoryMaxBytes: memoryMaxBytes, durationSeconds: Double(duration.components.seconds), runs: runs)
    }

    private func runDemo(memwarnEnabled: Bool, logger: Logger, progress: @escaping @Sendable (Progress) -> Void) async throws -> SoakRun {
        let label = memwarnEnabled ? "memwarn" : "baseline"
        let seconds = Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
        // The demo's files go in a folder of the soak's, removed afterwards: a run that is
        // OOM-killed cannot clean up after itself.
        // A fresh private folder (mkdtemp, 0700): nobody else can have prepared anything in it.
        let dataDirectory: String
        do {
            dataDirectory = try PrivateDirectory.makeTemporary(prefix: "memwarn-soak-\(label)")
        } catch {
            throw ConstrainedRun.StartError(description: "the demo's data folder: \(error)")
        }
        defer { try? FileManager.default.removeItem(atPath: dataDirectory) }
        var command = [demoPath, "--duration", String(seconds), "--data-dir", dataDirectory]
        if !memwarnEnabled { command.append("--no-memwarn") }
        let output: PipeEnds
        do {
            output = try PipeEnds()
        } catch {
            throw ConstrainedRun.StartError(description: "the demo's output: \(error)")
        }
        let run = try ConstrainedRun(.init(command: command, memoryMaxBytes: memoryMaxBytes, policy: policy, sampleInterval: sampleInterval,
                                           standardOutput: output.writeEnd.rawValue, namePrefix: "memwarn-soak"), logger: logger)
        // Closed here once the demo holds its copy: end of file when the demo exits.
        let lines: LineStream
        do {
            lines = try LineStream(reading: output.keepingReadEnd(), name: "memwarn-soak-out")
        } catch {
            throw ConstrainedRun.StartError(description: "the demo's output: \(error)")
        }
        let level = Locked(MemoryPressureLevel.normal)
        let report = await run.wait(
            onLevel: { event in level.withLock { $0 = event.level } },
            onSample: { sample in progress(Progress(label: label, seconds: sample.seconds, usageBytes: sample.usageBytes, level: level.withLock { $0 })) })
        var demo = DemoRecord()
        for line in await lines.remainingLines() { demo.read(line) }
        return SoakRun(label: label, memwarnEnabled: memwarnEnabled, run: report, demo: demo)
    }
}

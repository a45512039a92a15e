import Foundation
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
        var descriptors: [Int32] = [-1, -1]
        guard pipe(&descriptors) == 0 else { throw ConstrainedRun.StartError(description: "pipe failed: errno \(errno)") }
        for descriptor in descriptors { _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC) }
        let (readEnd, writeEnd) = (descriptors[0], descriptors[1])
        let run: ConstrainedRun
        do {
            run = try ConstrainedRun(.init(command: command, memoryMaxBytes: memoryMaxBytes, policy: policy, sampleInterval: sampleInterval,
                                           standardOutput: writeEnd, namePrefix: "memwarn-soak"), logger: logger)
        } catch {
            close(readEnd)
            close(writeEnd)
            throw error
        }
        close(writeEnd)  // the demo holds it now: end of file when it exits
        let lines = LineReader(descriptor: readEnd)
        let level = Locked(MemoryPressureLevel.normal)
        let report = await run.wait(
            onLevel: { event in level.withLock { $0 = event.level } },
            onSample: { sample in progress(Progress(label: label, seconds: sample.seconds, usageBytes: sample.usageBytes, level: level.withLock { $0 })) })
        var demo = DemoRecord()
        for line in await lines.all() { demo.read(line) }
        return SoakRun(label: label, memwarnEnabled: memwarnEnabled, run: report, demo: demo)
    }
}

/// Reads a descriptor's lines to its end on a thread of its own, then closes it.
final class LineReader: Sendable {
    private let lines = Locked<[String]?>(nil)
    private let done = Locked<[CheckedContinuation<[String], Never>]>([])

    init(descriptor: Int32) {
        Thread.detachNewThread { [self] in
            let handle = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
            let text = String(decoding: handle.readDataToEndOfFile(), as: UTF8.self)
            let all = text.split(separator: "\n").map(String.init)
            lines.withLock { $0 = all }
            for waiter in done.withLock({ waiters in defer { waiters = [] }; return waiters }) { waiter.resume(returning: all) }
        }
    }

    /// Every line, once the writer has closed.
    func all() async -> [String] {
        await withCheckedContinuation { continuation in
            let ready = lines.withLock { lines -> [String]? in
                if let lines { return lines }
                done.withLock { $0.append(continuation) }
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }
}

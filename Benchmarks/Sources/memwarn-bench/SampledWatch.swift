import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// `memwarn watch --json --cgroup PATH` run as nobody (`setpriv`): a monitor that may not register
/// cgroup v1 thresholds and so samples usage adaptively — the path of cgroup v2, of hosts without
/// a limit, and of ordinary users. Each line it prints is stamped with `CLOCK_MONOTONIC` as it
/// arrives (a thread of its own waits for them), so a latency measured with it includes the
/// pipe, as for any observer in another process.
final class SampledWatch: @unchecked Sendable {
    // @unchecked: `process` and `reader` are set in init and only read afterwards; the
    // observations are behind their mutex.
    struct Observation: Sendable {
        var level: String
        var source: String
        var nanoseconds: UInt64
        var isRaised: Bool { level != "normal" }
    }

    static let nobody = ["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]

    private let process = Process()
    private let observed = Mutex<[Observation]>([])

    /// Starts the watch on `cgroupPath` (as `/proc/PID/cgroup` names it), with `environment`
    /// added to this process's (`MEMWARN_*` policy keys), and waits for its first line.
    init(cli: String, cgroupPath: String, environment: [String: String]) throws {
        process.executableURL = URL(fileURLWithPath: Self.nobody[0])
        process.arguments = Array(Self.nobody.dropFirst()) + [cli, "watch", "--json", "--cgroup", cgroupPath]
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let handle = pipe.fileHandleForReading
        let thread = Thread { [self] in
            var pending: [UInt8] = []
            while true {
                let chunk = handle.availableData
                let now = monotonicNanoseconds()
                if chunk.isEmpty { return }
                pending.append(contentsOf: chunk)
                while let newline = pending.firstIndex(of: 10) {
                    let line = Data(pending[..<newline])
                    pending.removeSubrange(...newline)
                    guard let object = try? JSONSerialization.jsonObject(with: line) as? [String: Any],
                          let level = object["level"] as? String else { continue }
                    let source = object["source"] as? String ?? "?"
                    observed.withLock { $0.append(Observation(level: level, source: source, nanoseconds: now)) }
                }
            }
        }
        thread.start()
        let deadline = ContinuousClock.now + .seconds(10)
        while observations.isEmpty {
            guard process.isRunning, ContinuousClock.now < deadline else {
                stop()
                throw BenchmarkError("memwarn watch as nobody printed no first line (is \(cli) reachable by nobody?)")
            }
            usleep(1_000)
        }
    }

    /// The watch's pid (its `memwarn-monitor` thread is the one to measure).
    var pid: Int32 { process.processIdentifier }

    /// Every line so far.
    var observations: [Observation] { observed.withLock { $0 } }

    /// The latest line.
    var latest: Observation? { observed.withLock { $0.last } }

    /// Ends it (SIGINT, as Ctrl-C) and waits.
    func stop() {
        guard process.isRunning else { return }
        kill(process.processIdentifier, SIGINT)
        process.waitUntilExit()
    }
}

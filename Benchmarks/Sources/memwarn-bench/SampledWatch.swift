import Foundation
import MemwarnTestKit
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// `memwarn watch --json --cgroup PATH` run as nobody (`setpriv`): a monitor that may not register
/// cgroup v1 thresholds and so samples usage adaptively — the path of cgroup v2, of hosts without
/// a limit, and of ordinary users. A thread of its own waits in ``LineChild/nextLine(timeout:)``
/// and stamps each line with `CLOCK_MONOTONIC` as it arrives, so a latency measured with it
/// includes the pipe, as for any observer in another process.
final class SampledWatch: Sendable {
    struct Observation: Sendable {
        var level: String
        var source: String
        var nanoseconds: UInt64
        var isRaised: Bool { level != "normal" }
    }

    private let child: LineChild
    private let observed = Mutex<[Observation]>([])

    /// Starts the watch on `cgroupPath` (as `/proc/PID/cgroup` names it), with `environment`
    /// added to this process's (`MEMWARN_*` policy keys), and waits for its first line.
    init(cli: String, cgroupPath: String, environment: [String: String]) throws {
        let inherited = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        child = try LineChild(ChildProcess.asNobody + [cli, "watch", "--json", "--cgroup", cgroupPath],
                              environment: inherited.map { "\($0.key)=\($0.value)" })
        let thread = Thread { [self] in
            // Ends when the watch closes its output (stopped), as nextLine then throws.
            while let line = try? child.nextLine(timeout: .seconds(24 * 3600)) {
                let now = ChildProcess.monotonicNanoseconds()
                guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                      let level = object["level"] as? String else { continue }
                let observation = Observation(level: level, source: object["source"] as? String ?? "?", nanoseconds: now)
                observed.withLock { $0.append(observation) }
            }
        }
        thread.start()
        let deadline = ContinuousClock.now + .seconds(10)
        while observations.isEmpty {
            guard !child.hasEnded, ContinuousClock.now < deadline else {
                stop()
                throw BenchmarkError("memwarn watch as nobody printed no first line (is \(cli) reachable by nobody?) \(child.standardErrorTail)")
            }
            usleep(1_000)
        }
    }

    /// The watch's pid (its `memwarn-monitor` thread is the one to measure).
    var pid: Int32 { child.pid }

    /// Every line so far.
    var observations: [Observation] { observed.withLock { $0 } }

    /// Ends it (SIGINT, as Ctrl-C) and waits.
    func stop() {
        guard !child.hasEnded else { return }
        child.signal(SIGINT)
        _ = try? child.waitForExit(timeout: .seconds(10))
    }
}

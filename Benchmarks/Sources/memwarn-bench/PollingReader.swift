import Memwarn
import MemwarnTestKit
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The baseline memwarn replaces: a thread that reads the cgroup's usage every 100 ms
/// (`memory.usage_in_bytes`, or `memory.current` on cgroup v2: opened, read and closed each
/// time, as an application would) and compares it with the warning mark.
///
/// It runs on a fixed schedule (absolute deadlines on `CLOCK_MONOTONIC`, so the period does
/// not drift with the read's own cost) and reports each change of side of the mark on
/// ``observations``, stamped with `CLOCK_MONOTONIC` just after the read that saw it.
final class PollingReader: Sendable {
    /// One change of side: the usage read and when the read returned.
    struct Observation: Sendable {
        var isAbove: Bool
        var usage: UInt64
        var nanoseconds: UInt64
    }

    static let threadName = "memwarn-poller"

    /// The usage file read.
    let usageFile: String
    let threshold: UInt64
    let intervalNanoseconds: UInt64
    /// Every change of side, in order; the first reading counts as one.
    let observations: AsyncStream<Observation>
    private let continuation: AsyncStream<Observation>.Continuation
    private let stopping = Atomic<Bool>(false)
    private let readCount = Atomic<Int>(0)
    private let failedReads = Atomic<Int>(0)
    private let thread = Mutex<pthread_t?>(nil)

    init(location: CgroupLocation, threshold: UInt64, interval: Duration = .milliseconds(100)) {
        usageFile = location.directory + (location.version == .v1 ? "/memory.usage_in_bytes" : "/memory.current")
        self.threshold = threshold
        let (seconds, attoseconds) = interval.components
        intervalNanoseconds = UInt64(seconds) * 1_000_000_000 + UInt64(attoseconds / 1_000_000_000)
        (observations, continuation) = AsyncStream.makeStream(of: Observation.self)
    }

    /// Reads done so far.
    var reads: Int { readCount.load(ordering: .relaxed) }
    /// Reads that failed (the cgroup could not be read).
    var failures: Int { failedReads.load(ordering: .relaxed) }

    /// Starts the thread (named ``threadName``).
    func start() {
        let box = Unmanaged.passRetained(ThreadBody { [self] in loop() }).toOpaque()
        var created = pthread_t()
        let status = pthread_create(&created, nil, { raw in
            let body = Unmanaged<ThreadBody>.fromOpaque(raw!).takeRetainedValue()
            nameCurrentThread(PollingReader.threadName)
            body.run()
            return nil
        }, box)
        precondition(status == 0, "pthread_create failed: \(status)")
        thread.withLock { $0 = created }
    }

    /// Stops the thread (within one interval) and waits for it to end.
    func stop() {
        stopping.store(true, ordering: .relaxed)
        if let running = thread.withLock({ state -> pthread_t? in defer { state = nil }; return state }) {
            pthread_join(running, nil)
        }
        continuation.finish()
    }

    private func loop() {
        var wasAbove: Bool?
        var deadline = ChildProcess.monotonicNanoseconds()
        while !stopping.load(ordering: .relaxed) {
            do {
                guard let text = readSmallFile(usageFile), let usage = UInt64(text.trimmingNewline) else {
                    throw BenchmarkError("\(usageFile) held no usage")
                }
                let seen = ChildProcess.monotonicNanoseconds()
                readCount.add(1, ordering: .relaxed)
                let isAbove = usage >= threshold
                if isAbove != wasAbove {
                    wasAbove = isAbove
                    continuation.yield(Observation(isAbove: isAbove, usage: usage, nanoseconds: seen))
                }
            } catch {
                failedReads.add(1, ordering: .relaxed)
            }
            deadline += intervalNanoseconds
            var until = timespec(tv_sec: Int(deadline / 1_000_000_000), tv_nsec: Int(deadline % 1_000_000_000))
            while clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, nil) == EINTR {}
        }
    }
}

/// Hands a closure to a new POSIX thread.
private final class ThreadBody: Sendable {
    let run: @Sendable () -> Void
    init(_ run: @escaping @Sendable () -> Void) { self.run = run }
}

import Logging
import Memwarn
import Metrics
import NIOCore
import ServiceLifecycle
import Synchronization

/// Accepted jobs, held by the service until the worker has processed them.
///
/// Nothing memwarn can release: this memory goes down only when the worker catches up, so when
/// jobs arrive faster than it drains, usage climbs past whatever the caches gave back. That is
/// the case memwarn's exhausted state is for: every tier released and usage still at the
/// critical mark. The load-shedding middleware then refuses new requests (503, Retry-After)
/// until the worker has brought usage back below the warning mark. The queue itself has no
/// bound: memory is its bound.
final class JobQueue: Sendable {
    private struct State {
        var jobs: [ByteBuffer] = []
        var bytes = 0
    }

    private let state = Mutex(State())
    private let accepted = Counter(label: "service_jobs_accepted_total")
    private let processed = Counter(label: "service_jobs_processed_total")

    /// Queues a job; returns its position in the queue.
    func enqueue(_ payload: ByteBuffer) -> Int {
        accepted.increment()
        return state.withLock { state in
            state.jobs.append(payload)
            state.bytes += payload.readableBytes
            return state.jobs.count
        }
    }

    /// Takes up to `count` jobs from the front of the queue.
    func take(_ count: Int) -> [ByteBuffer] {
        state.withLock { state in
            let batch = Array(state.jobs.prefix(count))
            state.jobs.removeFirst(batch.count)
            state.bytes -= batch.reduce(0) { $0 + $1.readableBytes }
            return batch
        }
    }

    func markProcessed(_ count: Int) { processed.increment(by: Int64(count)) }

    var count: Int { state.withLock { $0.jobs.count } }
    var bytes: Int { state.withLock { $0.bytes } }
}

/// Processes queued jobs at a bounded rate: the service's real throughput, whatever the load.
struct JobWorker: Service {
    let queue: JobQueue
    let jobsPerSecond: Int
    let logger: Logger

    func run() async throws {
        try? await cancelWhenGracefulShutdown { [self] in
            let tick = Duration.milliseconds(50)
            var credit = 0.0
            while true {
                try await Task.sleep(for: tick)
                credit = min(credit + Double(jobsPerSecond) * 0.05, Double(max(1, jobsPerSecond / 20)))
                let processed = processBatch(upTo: Int(credit))
                credit -= Double(processed)
                if processed > 0 {
                    // The payloads were freed by this code, not by a memwarn release: give the
                    // freed heap back to the kernel, or the cgroup's usage would not come down
                    // (glibc keeps it; README, "Giving memory back").
                    ReleaseCoordinator.returnFreedMemory()
                }
            }
        }
    }

    /// Processes (checksums) up to `count` jobs and drops them; returns how many.
    private func processBatch(upTo count: Int) -> Int {
        let batch = queue.take(count)
        var checksum: UInt64 = 0
        for job in batch {
            job.withUnsafeReadableBytes { bytes in
                for word in bytes.bindMemory(to: UInt64.self).prefix(bytes.count / 8) { checksum = (checksum &+ word) &* 31 }
            }
        }
        queue.markProcessed(batch.count)
        if !batch.isEmpty { logger.trace("processed \(batch.count) jobs", metadata: ["checksum": "\(checksum)"]) }
        return batch.count
    }
}

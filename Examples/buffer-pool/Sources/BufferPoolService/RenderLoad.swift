import Logging
import Memwarn
import ServiceLifecycle

/// The service's work: renders in waves. Each render borrows a buffer from the pool, fills it
/// (touching every page, as real work would), holds it while it "renders", and keeps a small
/// result in a cache bounded at 16 MiB. A wave's crest lends out many buffers at
/// once; when it ebbs they sit idle in the pool until memwarn asks for them.
struct RenderLoad: Service {
    let pool: BufferPool
    let results: DiscardableCache<Int, [UInt8]>
    /// Says at the end how many renders completed (the footprint benchmark reads the rate).
    let logger: Logger
    /// Renders in flight at a wave's trough and at its crest.
    var trough = 4
    var crest = 32
    /// How long a wave takes, trough to trough.
    var wave = Duration.seconds(4)
    /// How long a render holds its buffer.
    var hold = Duration.milliseconds(150)
    /// The bytes of each render's result kept in `results`.
    var resultBytes = 64 << 10

    func run() async throws {
        let clock = ContinuousClock()
        let start = clock.now
        var next = 0
        var completed = 0
        try await withThrowingDiscardingTaskGroup { group in
            var inFlight = 0
            let done = AsyncStream<Void>.makeStream()
            var finished = done.stream.makeAsyncIterator()
            while !Task.isShuttingDownGracefully && !Task.isCancelled {
                // The wave: a triangle between trough and crest.
                let phase = ((clock.now - start) / wave).truncatingRemainder(dividingBy: 1)
                let share = phase < 0.5 ? phase * 2 : (1 - phase) * 2
                let target = trough + Int(Double(crest - trough) * share)
                while inFlight < target {
                    inFlight += 1
                    next += 1
                    let id = next
                    group.addTask {
                        defer { done.continuation.yield() }
                        do { try await render(id) } catch is CancellationError {}  // shutting down: the render is dropped
                    }
                }
                if await finished.next() != nil {
                    inFlight -= 1
                    completed += 1
                }
            }
            done.continuation.finish()
            group.cancelAll()
        }
        let (seconds, attoseconds) = (clock.now - start).components
        let tenths = Int((Double(seconds) * 10 + Double(attoseconds) / 1e17).rounded())
        logger.notice("renders completed: \(completed) in \(tenths / 10).\(tenths % 10) s")
    }

    private func render(_ id: Int) async throws {
        let result = try await pool.withBuffer { buffer in
            for offset in stride(from: 0, to: buffer.count, by: 4_096) { buffer[offset] = UInt8(truncatingIfNeeded: id &+ offset) }
            try await Task.sleep(for: hold)
            return [UInt8](buffer.prefix(resultBytes))
        }
        results.setObject(result, forKey: id, cost: result.count)
    }
}

import Memwarn
import Synchronization

/// Fixed-size byte buffers lent to work in flight and kept when they come back, so the next
/// piece of work does not pay for fresh pages. Buffers lent out are in use: no release can take
/// them. Buffers back in the pool are memory nobody uses: under pressure the pool gives them back.
final class BufferPool: MemoryConsumer {
    let name: String
    /// Idle buffers cost one allocation to rebuild: cheaper than any cache of computed values,
    /// so they go in the first tier a warning walks.
    let tier = ReleaseTier.caches
    let bufferBytes: Int
    /// The most idle buffers kept; one more that comes back is freed. `Int.max` (the default):
    /// every one is kept, and memwarn takes them back under pressure. A smaller number is a fixed
    /// budget, as a pool without memwarn would need.
    let maximumIdle: Int
    private let state = Mutex(State())

    private struct State {
        var idle: [[UInt8]] = []
        var lent = 0
    }

    /// A pool registered with `coordinator`, which holds it weakly: it leaves the registry when
    /// it is deallocated.
    init(name: String, bufferBytes: Int, maximumIdle: Int = .max, coordinator: ReleaseCoordinator = .shared) {
        precondition(bufferBytes > 0 && maximumIdle >= 0, "a buffer has at least one byte, and the pool keeps 0 idle buffers or more")
        self.name = name
        self.bufferBytes = bufferBytes
        self.maximumIdle = maximumIdle
        coordinator.register(self)
    }

    /// Lends a buffer to `body` (an idle one, else a new one) and takes it back when `body`
    /// returns or throws. `body` may write into the buffer but must keep its size (a buffer
    /// that comes back resized, or beyond ``maximumIdle``, is dropped, not kept).
    func withBuffer<T>(_ body: (inout [UInt8]) async throws -> T) async rethrows -> T {
        var buffer = state.withLock { state in
            state.lent += 1
            return state.idle.popLast()
        } ?? [UInt8](repeating: 0, count: bufferBytes)
        defer {
            state.withLock { state in
                state.lent -= 1
                if buffer.count == bufferBytes, state.idle.count < maximumIdle { state.idle.append(buffer) }
            }
        }
        return try await body(&buffer)
    }

    // MARK: MemoryConsumer: called on memwarn's release thread, while work borrows on others.

    /// Everything the pool owns: buffers lent out and buffers idle.
    var footprintBytes: Int { state.withLock { ($0.lent + $0.idle.count) * bufferBytes } }

    /// Buffers lent out: work in flight holds them, and no release can take them.
    var inUseBytes: Int? { state.withLock { $0.lent * bufferBytes } }

    /// Frees idle buffers until `targetBytes` are freed; lent ones stay with their work. The
    /// pool holds nothing already discarded, so the `discarded` tier frees nothing.
    func release(_ request: ReleaseRequest) -> Int {
        guard request.tier != .discarded, request.targetBytes > 0 else { return 0 }
        let wanted = request.targetBytes / bufferBytes + (request.targetBytes % bufferBytes == 0 ? 0 : 1)
        let taken = state.withLock { state in
            let count = min(wanted, state.idle.count)
            defer { state.idle.removeLast(count) }
            return Array(state.idle.suffix(count))
        }
        return taken.count * bufferBytes  // the buffers are freed here, outside the lock: borrowers never wait on free()
    }
}

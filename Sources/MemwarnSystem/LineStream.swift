/// The lines a descriptor delivers (a child's standard output or error), read to the end on a
/// thread of their own and taken one by one: blocking with a timeout (from a thread), or
/// awaited with a time limit (from a task).
package final class LineStream: Sendable {
    /// What the next line turned out to be.
    package enum Next: Sendable, Equatable {
        /// The oldest line not taken yet, without its newline.
        case line(String)
        /// The writer closed its end and every line was taken.
        case ended
        /// No line came within the time given.
        case timedOut
    }

    private struct State {
        var lines: [String] = []
        var taken = 0
        var partial: [UInt8] = []
        /// Every byte read, for ``text``.
        var all: [UInt8] = []
        var ended = false
        var readError: SystemError?
        var waiters: [(id: Int, continuation: CheckedContinuation<Next, Never>)] = []
        var nextWaiter = 0
        /// Waiters whose time ran out before they were registered.
        var expired: Set<Int> = []
    }

    private let state = ConditionLock(State())

    /// Starts reading `descriptor` to its end on a new thread, which then closes it.
    ///
    /// - Throws: ``SystemError`` from `pthread_create`.
    package init(reading descriptor: consuming FileDescriptor, name: String = "memwarn-lines") throws(SystemError) {
        let raw = descriptor.take()
        let state = self.state
        do throws(SystemError) {
            try SystemThread.start(name: name) {
                let descriptor = FileDescriptor(adopting: raw)
                var chunk = [UInt8](repeating: 0, count: 4096)
                while true {
                    let count: Int
                    do throws(SystemError) {
                        count = try descriptor.read(into: &chunk) ?? 0
                    } catch {
                        Self.end(state, error: error)
                        return
                    }
                    if count == 0 { break }
                    Self.append(chunk[0..<count], to: state)
                }
                Self.end(state, error: nil)
            }
        } catch {
            _ = FileDescriptor(adopting: raw)  // closed here: no thread took it
            throw error
        }
    }

    private static func append(_ bytes: ArraySlice<UInt8>, to state: ConditionLock<State>) {
        let resumed = state.withLock { state -> [(CheckedContinuation<Next, Never>, Next)] in
            state.all.append(contentsOf: bytes)
            for byte in bytes {
                if byte == UInt8(ascii: "\n") {
                    state.lines.append(String(decoding: state.partial, as: UTF8.self))
                    state.partial = []
                } else {
                    state.partial.append(byte)
                }
            }
            return handOut(&state)
        }
        for (waiter, next) in resumed { waiter.resume(returning: next) }
    }

    private static func end(_ state: ConditionLock<State>, error: SystemError?) {
        let resumed = state.withLock { state -> [(CheckedContinuation<Next, Never>, Next)] in
            if !state.partial.isEmpty {
                state.lines.append(String(decoding: state.partial, as: UTF8.self))
                state.partial = []
            }
            state.ended = true
            state.readError = error
            return handOut(&state)
        }
        for (waiter, next) in resumed { waiter.resume(returning: next) }
    }

    /// Gives the waiting tasks, oldest first, the lines not taken (and the end, once every line is).
    private static func handOut(_ state: inout State) -> [(CheckedContinuation<Next, Never>, Next)] {
        var resumed: [(CheckedContinuation<Next, Never>, Next)] = []
        while !state.waiters.isEmpty, let next = take(&state) {
            resumed.append((state.waiters.removeFirst().continuation, next))
        }
        return resumed
    }

    private static func take(_ state: inout State) -> Next? {
        if state.taken < state.lines.count {
            state.taken += 1
            return .line(state.lines[state.taken - 1])
        }
        return state.ended ? .ended : nil
    }

    /// The next line, blocking the calling thread for at most `timeout`.
    package func nextLine(timeout: Duration?) -> Next {
        state.wait(timeout: timeout) { state in state.waiters.isEmpty ? Self.take(&state) : nil } ?? .timedOut
    }

    /// The next line, awaited for at most `limit`.
    package func nextLine(within limit: Duration) async -> Next {
        let id = state.withLock { state in
            state.nextWaiter += 1
            return state.nextWaiter
        }
        let expiry = Task { [state] in
            do {
                try await Task.sleep(for: limit)  // the time limit, not a wait for the line
            } catch {
                return  // cancelled: the line came first
            }
            let expired = state.withLock { state in
                guard let index = state.waiters.firstIndex(where: { $0.id == id }) else {
                    state.expired.insert(id)  // not registered yet (or already answered)
                    return nil as CheckedContinuation<Next, Never>?
                }
                return state.waiters.remove(at: index).continuation
            }
            expired?.resume(returning: .timedOut)
        }
        defer {
            expiry.cancel()
            state.withLock { _ = $0.expired.remove(id) }
        }
        return await withCheckedContinuation { continuation in
            let now = state.withLock { state -> Next? in
                if state.waiters.isEmpty, let next = Self.take(&state) { return next }
                if state.expired.remove(id) != nil { return .timedOut }
                state.waiters.append((id, continuation))
                return nil
            }
            if let now { continuation.resume(returning: now) }
        }
    }

    /// Every line not taken yet, once the writer has closed its end.
    package func remainingLines() async -> [String] {
        var lines: [String] = []
        while case .line(let line) = await nextLine(within: .seconds(86_400 * 365)) { lines.append(line) }
        return lines
    }

    /// Whether the writer closed its end and every line was taken.
    package var hasEnded: Bool { state.withLock { $0.ended && $0.taken == $0.lines.count } }

    /// Why reading stopped before the end of the file, if it did.
    package var readError: SystemError? { state.withLock { $0.readError } }

    /// The last `count` lines read (taken or not), joined with ` | `, for messages.
    package func lastLines(_ count: Int) -> String {
        state.withLock { state in
            (state.lines.suffix(count) + (state.partial.isEmpty ? [] : [String(decoding: state.partial, as: UTF8.self)])).joined(separator: " | ")
        }
    }

    /// Everything read so far, taken or not, as it was written (a child's whole output).
    package var text: String { state.withLock { String(decoding: $0.all, as: UTF8.self) } }

    /// Blocks until the writer has closed its end (for at most `timeout`), taking no line.
    ///
    /// - Returns: whether it ended in time.
    package func waitForEnd(timeout: Duration?) -> Bool {
        state.wait(timeout: timeout) { $0.ended ? true : nil } ?? false
    }
}

import MemwarnSystem

/// How a callback handler ended.
public enum HandlerOutcome: Sendable, Hashable, CustomStringConvertible {
    /// It returned in time.
    case completed
    /// It threw.
    case failed(reason: String)
    /// It was still running at its deadline: cut off (cancelled, no longer awaited).
    case overran(deadline: Duration)

    public var description: String {
        switch self {
        case .completed: "completed"
        case .failed(let reason): "failed: \(reason)"
        case .overran(let deadline): "overran its \(deadline) deadline and was cut off"
        }
    }
}

extension LifeCycleConfiguration {
    /// The deadline of a callback's handler: `didEnterBackground`, `willTerminate` and
    /// `didReceiveMemoryWarning` have one; the others run to their end (`nil`).
    func deadline(for callback: LifeCycleCallback) -> Duration? {
        switch callback {
        case .didEnterBackground: backgroundHandlerDeadline
        case .willTerminate: terminationDeadline
        case .didReceiveMemoryWarning: memoryWarningDeadline
        default: nil
        }
    }
}

/// Runs `handler` until it returns or `deadline` passes, whichever is first (to its end without
/// a deadline). At the deadline the handler's task is cancelled and no longer awaited: one that
/// ignores cancellation runs on detached from its caller, which goes on.
///
/// - Returns: the outcome, and the handler's task (still running after an overrun: the
///   subject's next callback waits for it, ``LifeCycleMachine/runDelegateCallback(deadline:_:)``).
func runHandler(deadline: Duration?, _ handler: @escaping @Sendable () async throws -> Void) async -> (HandlerOutcome, Task<Void, Never>) {
    let work = Locked<Task<Void, Never>?>(nil)
    let outcome = await withCheckedContinuation { (continuation: CheckedContinuation<HandlerOutcome, Never>) in
        let once = FirstOutcome(continuation)
        let task = Task {
            do {
                try await handler()
                once.finish(.completed)
            } catch {
                once.finish(.failed(reason: String(describing: error)))
            }
        }
        work.withLock { $0 = task }
        guard let deadline else { return }
        once.setTimer(
            Task {
                try? await Task.sleep(for: deadline)
                guard !Task.isCancelled, once.finish(.overran(deadline: deadline)) else { return }
                task.cancel()
            })
    }
    return (outcome, work.withLock { $0! })
}

/// Resumes a continuation with the first outcome given, once; cancels the deadline timer
/// when the handler wins.
private final class FirstOutcome: Sendable {
    private struct State {
        var continuation: CheckedContinuation<HandlerOutcome, Never>?
        var timer: Task<Void, Never>?
    }

    private let state: Locked<State>

    init(_ continuation: CheckedContinuation<HandlerOutcome, Never>) {
        state = Locked(State(continuation: continuation))
    }

    func setTimer(_ timer: Task<Void, Never>) {
        let finished = state.withLock { state in
            state.timer = timer
            return state.continuation == nil
        }
        if finished { timer.cancel() }
    }

    /// Resumes with `outcome` if nothing did before; returns whether it did.
    @discardableResult
    func finish(_ outcome: HandlerOutcome) -> Bool {
        let (continuation, timer) = state.withLock { state in
            defer { state.continuation = nil }
            return (state.continuation, state.timer)
        }
        guard let continuation else { return false }
        timer?.cancel()  // harmless when the timer itself is finishing
        continuation.resume(returning: outcome)
        return true
    }
}

import Memwarn
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

/// Runs a callback's handler: `didEnterBackground`, `willTerminate` and `didReceiveMemoryWarning` under their deadlines
/// from `configuration`, the others to their end.
func runCallbackHandler(_ callback: LifeCycleCallback, configuration: LifeCycleConfiguration,
                        _ handler: @escaping @Sendable () async throws -> Void) async -> HandlerOutcome {
    switch callback {
    case .didEnterBackground: return await runHandler(deadline: configuration.backgroundHandlerDeadline, handler)
    case .willTerminate: return await runHandler(deadline: configuration.terminationDeadline, handler)
    case .didReceiveMemoryWarning: return await runHandler(deadline: configuration.memoryWarningDeadline, handler)
    default:
        do {
            try await handler()
            return .completed
        } catch {
            return .failed(reason: String(describing: error))
        }
    }
}

/// Runs `handler` until it returns or `deadline` passes, whichever is first. At the deadline
/// the handler's task is cancelled and no longer awaited: one that ignores cancellation runs on
/// detached from its caller, which goes on.
func runHandler(deadline: Duration, _ handler: @escaping @Sendable () async throws -> Void) async -> HandlerOutcome {
    await withCheckedContinuation { (continuation: CheckedContinuation<HandlerOutcome, Never>) in
        let once = FirstOutcome(continuation)
        let work = Task {
            do {
                try await handler()
                once.finish(.completed)
            } catch {
                once.finish(.failed(reason: String(describing: error)))
            }
        }
        once.setTimer(Task {
            try? await Task.sleep(for: deadline)
            guard !Task.isCancelled, once.finish(.overran(deadline: deadline)) else { return }
            work.cancel()
        })
    }
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

import MemwarnSystem
import ServiceLifecycle

/// Waiting for the end of a service that has nothing else to do: the monitor when memwarn is
/// turned off, the control endpoint when it cannot serve.
package enum GracefulShutdown {
    /// Returns on graceful shutdown or cancellation of the calling task.
    package static func wait() async {
        let stop = Locked<(stopped: Bool, waiter: CheckedContinuation<Void, Never>?)>((false, nil))
        await withTaskCancellationOrGracefulShutdownHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let stopped = stop.withLock { stop in
                    if !stop.stopped { stop.waiter = continuation }
                    return stop.stopped
                }
                if stopped { continuation.resume() }
            }
        } onCancelOrGracefulShutdown: {
            let waiter = stop.withLock { stop in
                stop.stopped = true
                defer { stop.waiter = nil }
                return stop.waiter
            }
            waiter?.resume()
        }
    }
}

import CgroupKit
import MemwarnSystem

/// A ``MonitorEngine`` running on a thread of its own: its loop started, its sources registered
/// and its first reading taken before ``start(_:name:whenEnded:)`` returns, torn down when the loop
/// ends. A service's monitor (``MonitorSession``) and a node agent's watch of its parent each run
/// their engine on one.
package final class EngineThread: Sendable {
    /// How the engine started.
    package struct Start: Sendable {
        /// How changes of usage reach it.
        package var usageWatch: MonitorArming.UsageWatch
        /// cgroup v1 as root: usage thresholds still being registered.
        package var pendingThresholds: Int
    }

    private let loop: EventLoop
    private let engine: ThreadConfined<MonitorEngine>
    /// How the engine started.
    package let start: Start
    /// The engine's end: its failure, or success after a stop.
    private let ended: ConditionLock<Result<Void, any Error>?>
    private let endedStream: AsyncStream<Result<Void, any Error>>

    private init(
        loop: EventLoop, engine: ThreadConfined<MonitorEngine>, start: Start, ended: ConditionLock<Result<Void, any Error>?>,
        endedStream: AsyncStream<Result<Void, any Error>>
    ) {
        self.loop = loop
        self.engine = engine
        self.start = start
        self.ended = ended
        self.endedStream = endedStream
    }

    /// Starts `engine`'s loop on a new thread named `name`, and returns once the engine has
    /// registered every source and taken its first reading.
    ///
    /// - Parameters:
    ///   - engine: an engine made on `engine.loop`, not started.
    ///   - name: the thread's name.
    ///   - whenEnded: called on the engine's thread once its loop ended and its sources are torn
    ///     down (or once it failed to start), before the end is reported.
    /// - Throws: what the engine's start threw (CgroupKit's `CgroupError`, ``MonitorError``), or
    ///   ``MonitorError`` when the thread cannot be started; `whenEnded` has run by then.
    package static func start(
        _ engine: MonitorEngine, name: String, whenEnded: @escaping @Sendable () -> Void
    ) throws -> EngineThread {
        let loop = engine.loop
        let confined = ThreadConfined(engine, on: loop)
        let armed = ConditionLock<Result<Start, any Error>?>(nil)
        let ended = ConditionLock<Result<Void, any Error>?>(nil)
        let (endedStream, endStream) = AsyncStream.makeStream(of: Result<Void, any Error>.self, bufferingPolicy: .bufferingNewest(1))
        do throws(SystemError) {
            try SystemThread.start(name: name) {
                var outcome: Result<Void, any Error> = .success(())
                do {
                    try loop.run {  // the engine is read on the loop's thread from here on
                        do {
                            try confined.value.start()
                        } catch let error as SystemError {
                            throw MonitorError(error)
                        }
                        armed.withLock { $0 = .success(Start(usageWatch: confined.value.usageWatch, pendingThresholds: confined.value.pendingThresholds)) }
                    }
                } catch {
                    outcome = .failure(error)
                }
                confined.value.tearDown()
                if case .success = outcome, let failure = confined.value.failure { outcome = .failure(failure) }
                armed.withLock { state in
                    if state == nil, case .failure(let error) = outcome { state = .failure(error) }
                }
                whenEnded()
                endStream.yield(outcome)
                endStream.finish()
                ended.withLock { $0 = outcome }
            }
        } catch {
            whenEnded()
            throw MonitorError(error)
        }
        switch armed.wait(timeout: nil, until: { $0 }) {
        case .success(let start)?:
            return EngineThread(loop: loop, engine: confined, start: start, ended: ended, endedStream: endedStream)
        case .failure(let error)?:
            throw error
        case nil:
            preconditionFailure("an untimed wait returned nothing")
        }
    }

    /// Runs `work` with the engine on its thread (any thread may ask); never, once it stopped.
    package func onEngine(_ work: @escaping @Sendable (MonitorEngine) -> Void) {
        loop.execute { [engine] in work(engine.value) }
    }

    /// Asks the engine to stop (any thread). Asking a stopped engine does nothing.
    package func stop() {
        loop.execute { [weak loop] in loop?.stop() }
    }

    /// Stops the engine and blocks until its thread has torn every source down.
    ///
    /// - Returns: how the engine ended.
    @discardableResult
    package func stopAndWait() -> Result<Void, any Error> {
        stop()
        return waitUntilEnded()
    }

    /// Blocks until the engine has ended (stopped, or failed for good).
    ///
    /// - Returns: how it ended: its failure (a cgroup deleted while watched), or success.
    @discardableResult
    package func waitUntilEnded() -> Result<Void, any Error> {
        guard let outcome = ended.wait(timeout: nil, until: { $0 }) else { preconditionFailure("an untimed wait returned nothing") }
        return outcome
    }

    /// Waits, without holding a thread, until the engine has ended.
    ///
    /// - Throws: what ended it: CgroupKit's `CgroupError` for a cgroup deleted while watched,
    ///   ``MonitorError`` when `epoll_wait` failed.
    package func ended() async throws {
        var outcome: Result<Void, any Error> = .success(())
        for await end in endedStream { outcome = end }
        try outcome.get()
    }
}

import CgroupKit
import Logging
import MemwarnRelease
import MemwarnSystem

/// While reads fail transiently (out of descriptors or memory, interrupted): every source is
/// kept, the episode is said once, and the failed reads are done again after a wait that doubles
/// up to a second, with the strongest wake seen meanwhile (and a source whose own read failed
/// drained again). The monitor never stops for this. Confined to the monitor's loop thread.
final class TransientRetry {
    /// A wake whose reading could not be taken.
    typealias Wake = (hint: WakeHint, signal: PressureSignal)

    private struct Episode {
        var backoff = Duration.milliseconds(5)
        /// The strongest wake whose snapshot could not be read.
        var wake: Wake?
        /// A source whose own read failed.
        var source: (any PressureSource)?
        var scheduled = false
        var failures = 0
    }

    private let loop: EventLoop
    private let logger: Logger
    /// Told of each failure, and of the episode's end (`nil`).
    private let noted: (CgroupError?) -> Void
    /// Does the owed work again: drains the source, then takes the wake's reading.
    private let redo: ((any PressureSource)?, Wake?) -> Void
    private var episode: Episode?

    init(
        loop: EventLoop, logger: Logger, noted: @escaping (CgroupError?) -> Void,
        redo: @escaping ((any PressureSource)?, Wake?) -> Void
    ) {
        self.loop = loop
        self.logger = logger
        self.noted = noted
        self.redo = redo
    }

    /// A read failed transiently: `wake` is the reading it owed, `source` a source whose own
    /// read it was.
    func failed(_ error: CgroupError, owing wake: Wake?, source: (any PressureSource)?) {
        var state = episode ?? Episode()
        if episode == nil {
            logger.warning("memory monitor: a read failed transiently; it keeps its sources and retries", metadata: ["error": "\(error)"])
        }
        state.failures += 1
        if let wake, wake.hint >= state.wake?.hint ?? .readNow { state.wake = wake }
        if let source { state.source = source }
        noted(error)
        guard !state.scheduled else {
            episode = state
            return
        }
        state.backoff = min(state.backoff * 2, .seconds(1))
        state.scheduled = true
        episode = state
        loop.schedule(at: loop.now + state.backoff) { [unowned self] in
            guard var pending = episode else { return }
            let (source, wake) = (pending.source, pending.wake)
            (pending.scheduled, pending.source, pending.wake) = (false, nil, nil)
            episode = pending
            redo(source, wake)
        }
    }

    /// Reads succeed again: the episode, if one was under way, is over — unless its retry still
    /// owes a read that failed (a source to drain again, a wake whose reading failed): a read of
    /// another file succeeding does not do that one's work, so the episode lasts until the retry
    /// does it. (Ending it here dropped the retry: a `memory.events` change whose read failed
    /// once was never seen, a crossing whose full reading failed waited for the next poll.)
    func succeeded() {
        guard let state = episode, state.wake == nil, state.source == nil else { return }
        episode = nil
        logger.notice("memory monitor reads again after transient errors", metadata: ["failures": "\(state.failures)"])
        noted(nil)
    }
}

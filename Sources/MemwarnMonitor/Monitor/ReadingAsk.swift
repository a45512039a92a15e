import MemwarnRelease
import MemwarnSystem

/// The release loop's way back to its engine (``ReleaseLoop/Context/askForReading``): asks for a
/// fresh reading, taken on the engine's loop thread, when a reading the release thread would act
/// on (one that asks for a release, or any while memory is exhausted) is no rise and was read
/// before the latest release ended. Such a reading shows usage from before that release, so the
/// release thread drops it; the fresh one, decided as any other, says whether another release is
/// due.
///
/// The fresh reading is labelled `recheck`, as are the readings
/// the level machine asks for while the level is raised: both are readings the monitor asks for
/// itself, with no kernel signal behind them, to check usage again, and neither asks for a level
/// (``WakeHint/readNow``). A level event caused by one cannot be told from the other (its
/// `source`, `memwarn watch --json`); a label of its own would change what those print.
///
/// It holds the engine weakly: the engine holds the release loop, which holds this.
final class ReadingAsk: @unchecked Sendable {
    // @unchecked: `engine` is set once, before the engine's loop runs (the thread's start orders
    // the write before every read), and read on the loop's thread only.
    private weak var engine: MonitorEngine?
    private let loop: EventLoop

    init(loop: EventLoop) {
        self.loop = loop
    }

    /// The engine to ask; set before its loop runs.
    func connect(_ engine: MonitorEngine) {
        self.engine = engine
    }

    /// Asks for a reading, to be taken on the loop's thread soon: a recheck after a release (see
    /// above), asking for no level. Any thread.
    func ask() {
        loop.execute { [weak self] in self?.engine?.wake(hint: .readNow, source: .recheck) }
    }
}

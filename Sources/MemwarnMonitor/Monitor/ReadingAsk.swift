import MemwarnRelease
import MemwarnSystem

/// The release loop's way back to its engine: a reading asked for on the engine's loop thread,
/// when the reading the release thread took is older than its latest release
/// (``ReleaseLoop/Context/askForReading``).
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

    /// Asks for a reading, to be taken on the loop's thread soon (a re-check). Any thread.
    func ask() {
        loop.execute { [weak self] in self?.engine?.wake(hint: .normal, source: .recheck) }
    }
}

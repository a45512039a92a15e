import MemwarnRelease
import MemwarnSystem

/// How often a node agent may ask each service, and whom it asks next: pure logic, every step
/// given its instant, tested without a socket and without waiting.
///
/// The rules:
/// - **Largest first, at warning before critical.** Of the services that may be asked, the one
///   with the most kernel-measured usage; at the critical level a service that may still be asked
///   at warning comes first (its caches go before anyone's suspended units are terminated).
/// - **Only services with something to give.** A service is asked at a level only when what it
///   last said it holds there (its consumers' footprints less what they say is in use; suspended
///   units only at critical) is at least the smallest release worth asking for (1 % of the limit,
///   1 MiB at least), or when it has not said yet (a service just found, whose first status is
///   still coming, is asked on its kernel-measured usage alone).
/// - **A few asks a second, at most.** One service is asked at warning at most every
///   ``shortestInterval(at:)`` (250 ms), at critical at most every second. An ask that freed less
///   than the smallest release (a lean ask, as the kernel measured it) doubles that service's wait
///   at that level, up to ``longestInterval`` (30 s); the wait is back to its shortest once an ask
///   frees enough, or once the service says it holds the smallest release more than when it was
///   last asked.
/// - **A service that does not answer** is left out for ``unansweredPause`` (30 s).
///
/// - **Once a press, while nobody together can relieve the parent.** When what the services could
///   give together is less than the parent needs (memory held elsewhere: page cache, processes
///   without memwarn), each is asked at most once in the press at each level; then
///   ``Step/nothingToGive`` says so, and until the press ends (``pressEnded()``) the agent asks
///   nobody unless the services together could bring the parent under its mark, the level rises
///   (warning to critical), or a service is found: a cache that traffic refills is not emptied
///   again and again for a parent it cannot relieve. (At the critical mark each leased service
///   counts the parent again on its own.)
struct AskPacing {
    /// A service as the next step sees it.
    struct Candidate: Sendable, Hashable {
        var pid: Int32
        /// Its kernel-measured usage: the order.
        var usageBytes: UInt64
        /// What it last said it could give at warning and at critical, `nil` before it said.
        var canGive: Holding?
    }

    /// What a service says it holds and could give, by level.
    struct Holding: Sendable, Hashable {
        var atWarning: UInt64
        var atCritical: UInt64

        func at(_ level: MemoryPressureLevel) -> UInt64 { level == .critical ? atCritical : atWarning }
    }

    /// What to do next.
    enum Step: Sendable, Equatable {
        /// Ask this service at this level.
        case ask(pid: Int32, level: MemoryPressureLevel)
        /// Nobody may be asked before this instant (pacing).
        case wait(until: ContinuousClock.Instant)
        /// Nobody has anything to give: the memory over the mark is held elsewhere.
        case nothingToGive
        /// Nobody else may be asked; asks are under way, whose answers decide.
        case waitForAnswers
    }

    /// The shortest wait between two asks of one service at `level`.
    static func shortestInterval(at level: MemoryPressureLevel) -> Duration {
        level == .critical ? .seconds(1) : .milliseconds(250)
    }

    /// The longest a service whose asks kept freeing little is left alone.
    static let longestInterval = Duration.seconds(30)
    /// How long a service that did not answer an ask is left out.
    static let unansweredPause = Duration.seconds(30)

    private struct Pace {
        /// When it was last asked, or last answered.
        var since: ContinuousClock.Instant
        /// How long after `since` it may be asked again.
        var wait: Duration
        /// What it said it could give when a lean ask was answered: saying more by the smallest
        /// release ends the longer wait.
        var leanAt: UInt64?
        var nextAsk: ContinuousClock.Instant { since + wait }
    }

    private var paces: [Key: Pace] = [:]
    private var leftOut: [Int32: ContinuousClock.Instant] = [:]
    /// Set once nobody had anything to give in this press: the level then, and the services.
    private var heldElsewhere: (level: MemoryPressureLevel, services: Set<Int32>)?
    /// The services asked in this press, at each level.
    private var askedThisPress: Set<Key> = []

    private struct Key: Hashable {
        var pid: Int32
        var level: MemoryPressureLevel
    }

    /// The next step: whom to ask among `services` for a parent at `level` that needs `needBytes`
    /// freed, given the smallest release worth asking for. The `busy` services (being asked now)
    /// are not asked again, and while there are any the agent waits for their answers rather
    /// than decide that nobody can give.
    mutating func next(
        among services: [Candidate], busy: Set<Int32> = [], level: MemoryPressureLevel, needBytes: UInt64, smallestRelease: UInt64,
        now: ContinuousClock.Instant
    ) -> Step {
        let pids = Set(services.map(\.pid))
        // What they could give together: one that has not said counts as able to give it all.
        let couldGive = services.lazy.map { $0.canGive?.at(level) ?? .max }.saturatingSum()
        if let held = heldElsewhere {
            guard level > held.level || !pids.isSubset(of: held.services) || couldGive >= needBytes else {
                heldElsewhere = (min(held.level, level), held.services)  // a later rise is a rise from here
                return .nothingToGive
            }
            heldElsewhere = nil
        }
        let levels: [MemoryPressureLevel] = level == .critical ? [.warning, .critical] : [.warning]
        let ordered = services.sorted { $0.usageBytes != $1.usageBytes ? $0.usageBytes > $1.usageBytes : $0.pid < $1.pid }
        var earliest: ContinuousClock.Instant?
        let enough = couldGive >= needBytes
        for asked in levels {
            for service in ordered where !busy.contains(service.pid) && (enough || !askedThisPress.contains(Key(pid: service.pid, level: asked))) {
                if let until = leftOut[service.pid], until > now {
                    earliest = min(earliest ?? until, until)
                    continue
                }
                let holds = service.canGive?.at(asked)
                if let holds, holds < smallestRelease { continue }  // nothing to give at this level
                guard let pace = paces[Key(pid: service.pid, level: asked)] else { return .ask(pid: service.pid, level: asked) }
                let renewed = pace.leanAt.map { lean in (holds ?? 0) >= lean &+ smallestRelease } ?? false
                if pace.nextAsk <= now || (renewed && now >= pace.since + Self.shortestInterval(at: asked)) {
                    return .ask(pid: service.pid, level: asked)
                }
                earliest = min(earliest ?? pace.nextAsk, pace.nextAsk)
            }
        }
        if let earliest { return .wait(until: earliest) }
        if !busy.isEmpty { return .waitForAnswers }
        heldElsewhere = (level, pids)
        return .nothingToGive
    }

    /// The parent is back under its recovery mark: the next press starts afresh.
    mutating func pressEnded() {
        heldElsewhere = nil
        askedThisPress = []
    }

    /// An ask went out at `now`: the service waits at least the shortest interval at that level.
    mutating func asked(_ pid: Int32, at level: MemoryPressureLevel, now: ContinuousClock.Instant) {
        let key = Key(pid: pid, level: level)
        var pace = paces[key] ?? Pace(since: now, wait: Self.shortestInterval(at: level))
        pace.since = now
        paces[key] = pace
        askedThisPress.insert(key)
    }

    /// The service answered an ask at `level` and the kernel measured `freedBytes` (negative: its
    /// usage rose meanwhile). A lean ask doubles its wait at that level; one that freed enough
    /// brings the wait back to the shortest.
    mutating func answered(
        _ pid: Int32, at level: MemoryPressureLevel, freedBytes: Int64, holding: Holding?, smallestRelease: UInt64, now: ContinuousClock.Instant
    ) {
        let key = Key(pid: pid, level: level)
        var pace = paces[key] ?? Pace(since: now, wait: Self.shortestInterval(at: level))
        if freedBytes >= Int64(clamping: smallestRelease) {
            pace.wait = Self.shortestInterval(at: level)
            pace.leanAt = nil
        } else {
            pace.wait = min(pace.wait * 2, Self.longestInterval)
            pace.leanAt = holding?.at(level) ?? 0
        }
        pace.since = now
        paces[key] = pace
    }

    /// The service did not answer an ask: it is left out for ``unansweredPause``.
    mutating func unanswered(_ pid: Int32, now: ContinuousClock.Instant) {
        leftOut[pid] = now + Self.unansweredPause
    }

    /// The services left out now (they did not answer an ask a while ago).
    func leftOut(now: ContinuousClock.Instant) -> Set<Int32> {
        Set(leftOut.filter { $0.value > now }.keys)
    }

    /// Forgets services that are gone.
    mutating func keep(only pids: Set<Int32>) {
        paces = paces.filter { pids.contains($0.key.pid) }
        leftOut = leftOut.filter { pids.contains($0.key) }
    }
}

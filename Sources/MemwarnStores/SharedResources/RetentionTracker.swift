/// A ``ResourcePool``'s retention over time: the idle time a release requires now, doubled when
/// closed handles come back, back to the minimum after a quiet while. Pure: every step is given
/// its instant.
struct RetentionTracker: Sendable {
    let retention: ResourceRetention
    /// The idle time required since the last comeback.
    private var doubledIdle: Duration
    /// When a release last closed handles (cleared once a handle comes back after it).
    private var lastReleaseClose: ContinuousClock.Instant?
    /// When handles last came back.
    private var lastComeback: ContinuousClock.Instant?
    /// How many times closed handles came back.
    private(set) var comebacks = 0

    init(_ retention: ResourceRetention) {
        self.retention = retention
        doubledIdle = retention.minimumIdle
    }

    /// The idle time a release requires at `now`: back to the minimum once the longest idle time
    /// has passed since handles last came back.
    func requiredIdle(at now: ContinuousClock.Instant) -> Duration {
        guard let lastComeback, now - lastComeback < retention.longestIdle else { return retention.minimumIdle }
        return doubledIdle
    }

    /// How many of the idle handles (idle since `idleSince`, least recently used first) a
    /// release may close at `now`, from the front, with `openCount` handles open in all.
    func closable(idleSince: [ContinuousClock.Instant], openCount: Int, now: ContinuousClock.Instant) -> Int {
        let required = requiredIdle(at: now)
        let room = max(0, openCount - retention.minimumOpen)
        var count = 0
        for since in idleSince.prefix(room) {
            guard now - since >= required else { break }  // the rest were used more recently
            count += 1
        }
        return count
    }

    /// A release closed `count` handles at `now`.
    mutating func released(_ count: Int, at now: ContinuousClock.Instant) {
        if count > 0 { lastReleaseClose = now }
    }

    /// The pool opened a handle at `now`: a comeback when a release closed handles shortly
    /// before, which doubles the idle time required (from 1 s when the minimum is zero).
    mutating func opened(at now: ContinuousClock.Instant) {
        guard let closedAt = lastReleaseClose, now - closedAt < retention.comebackWindow else { return }
        let current = requiredIdle(at: now)
        lastReleaseClose = nil
        lastComeback = now
        comebacks += 1
        doubledIdle = min(current == .zero ? .seconds(1) : current * 2, retention.longestIdle)
    }
}

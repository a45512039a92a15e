/// Which idle handles a memory release may close in a ``ResourcePool``, so that a pool under
/// repeated critical releases does not close connections that the next request reopens at
/// once (a reconnect costs the service time and frees little: most of a database
/// connection's memory is in the server's process, outside the service's cgroup).
///
/// A release closes an idle handle only when:
/// - it has been idle at least the pool's current idle time: ``minimumIdle`` at first, doubled
///   each time handles that a release closed come back (the pool opens a handle within
///   ``comebackWindow`` of a release that closed some), up to ``longestIdle``, and back to
///   ``minimumIdle`` once ``longestIdle`` has passed with no handle coming back;
/// - and at least ``minimumOpen`` handles stay open (in use or idle) after it.
///
/// ``ResourcePool/closeIdle()`` and ``ResourcePool/closeIdleAndWait()``, the calls for going to
/// the background and for shutting down, close every idle handle whatever the retention says.
public struct ResourceRetention: Sendable, Hashable {
    /// How long a handle must have been idle before a release may close it, at first.
    public var minimumIdle: Duration
    /// The handles a release leaves open, in use or idle.
    public var minimumOpen: Int
    /// A handle opened this soon after a release closed some counts as one coming back: the
    /// idle time doubles.
    public var comebackWindow: Duration
    /// The longest idle time the doubling reaches, and how long the pool goes without a handle
    /// coming back before the idle time is back to ``minimumIdle``.
    public var longestIdle: Duration

    /// Creates a retention.
    ///
    /// - Parameters:
    ///   - minimumIdle: how long a handle must have been idle before a release may close it (≥ 0).
    ///   - minimumOpen: the handles a release leaves open (≥ 0).
    ///   - comebackWindow: an open this soon after a release that closed handles doubles the idle time (≥ 0).
    ///   - longestIdle: the most the idle time doubles to (≥ `minimumIdle`).
    public init(minimumIdle: Duration, minimumOpen: Int, comebackWindow: Duration, longestIdle: Duration) {
        precondition(minimumIdle >= .zero && comebackWindow >= .zero, "retention durations must not be negative")
        precondition(minimumOpen >= 0, "minimumOpen must not be negative")
        precondition(longestIdle >= minimumIdle, "longestIdle must be at least minimumIdle")
        self.minimumIdle = minimumIdle
        self.minimumOpen = minimumOpen
        self.comebackWindow = comebackWindow
        self.longestIdle = longestIdle
    }

    /// The default: idle 10 s before a release closes a handle, one handle kept open, a handle
    /// opened within 30 s of a release that closed some doubles the idle time, up to 5 minutes.
    public static let `default` = ResourceRetention(
        minimumIdle: .seconds(10), minimumOpen: 1, comebackWindow: .seconds(30), longestIdle: .seconds(300))

    /// None: a release closes any idle handle at once (for handles whose memory is mostly in this
    /// process and cheap to reopen, or a test of the release order).
    public static let none = ResourceRetention(minimumIdle: .zero, minimumOpen: 0, comebackWindow: .zero, longestIdle: .zero)
}

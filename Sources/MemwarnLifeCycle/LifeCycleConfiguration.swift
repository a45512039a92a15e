/// Deadlines and delays of the life cycle.
public struct LifeCycleConfiguration: Sendable, Hashable {
    /// How long `didEnterBackground` may run (iOS gives about 5 s). A handler still running
    /// then is cut off (its task is cancelled and no longer awaited) and reported; the unit
    /// then counts as unsaved and is not suspended.
    public var backgroundHandlerDeadline: Duration
    /// How long `willTerminate` handlers may run, together, when the process is told to stop.
    public var terminationDeadline: Duration
    /// How long a unit stays in the background, saved and with no background task, before
    /// it is suspended.
    public var suspensionDelay: Duration
    /// The background execution time a unit's background tasks get, counted from entering
    /// the background; when it runs out their expiration handlers run and they are ended.
    public var backgroundTaskTime: Duration
    /// The budget of one memory warning's whole sequence — the application's delegate (at most
    /// half of it while units run), then the running units' delegates, then the notification —
    /// and so how long the release of the same warning waits before it goes on. A handler still
    /// running then is cut off and reported. Short by default: the release — and the service's
    /// growth — does not wait longer.
    public var memoryWarningDeadline: Duration

    /// A configuration; each parameter sets the property of the same name. The defaults:
    /// 5 s, 5 s, 1 s, 30 s and 100 ms.
    ///
    /// - Parameters:
    ///   - backgroundHandlerDeadline: how long `didEnterBackground` may run.
    ///   - terminationDeadline: how long `willTerminate` handlers may run, together.
    ///   - suspensionDelay: how long a saved, idle unit stays in the background before it is
    ///     suspended.
    ///   - backgroundTaskTime: the background execution time a unit's background tasks get.
    ///   - memoryWarningDeadline: the budget of a memory warning's delegates, all together.
    public init(
        backgroundHandlerDeadline: Duration = .seconds(5), terminationDeadline: Duration = .seconds(5),
        suspensionDelay: Duration = .seconds(1), backgroundTaskTime: Duration = .seconds(30),
        memoryWarningDeadline: Duration = .milliseconds(100)
    ) {
        self.backgroundHandlerDeadline = backgroundHandlerDeadline
        self.terminationDeadline = terminationDeadline
        self.suspensionDelay = suspensionDelay
        self.backgroundTaskTime = backgroundTaskTime
        self.memoryWarningDeadline = memoryWarningDeadline
    }
}

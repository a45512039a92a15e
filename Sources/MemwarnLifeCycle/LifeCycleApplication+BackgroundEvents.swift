extension LifeCycleApplication {
    /// Delivers an event to a unit in the background, waking it if it does not run, as iOS
    /// does for a background event (the seeds: "The system launches the app … UIKit calls the
    /// app delegate's `applicationDidEnterBackground(_:)` method. UIKit delivers the event that
    /// caused the launch. … The app may be suspended again."):
    ///
    /// 1. a unit that is not running is launched into the background (`willFinishLaunching`,
    ///    with `restoring: true` if it ran before, `didFinishLaunching`, `didEnterBackground`);
    ///    a suspended one is resumed (`didEnterBackground`); one in the background gets fresh
    ///    background time; one in the foreground stays there;
    /// 2. a background task named `name` is begun for it, before anything else can suspend it;
    /// 3. `event` runs with the unit; if the background time
    ///    (``LifeCycleConfiguration/backgroundTaskTime``) runs out first, its task is cancelled;
    /// 4. the background task ends, and a unit in the background, saved and idle, is suspended
    ///    again after ``LifeCycleConfiguration/suspensionDelay``.
    ///
    /// ```swift
    /// let reply = try await app.deliverBackgroundEvent(to: "alice") { unit in
    ///     try await (unit.delegate as? Session)?.handle(message)
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - id: the unit's identifier; a unit never asked for is made.
    ///   - name: the background task's name, in notifications and the log.
    ///   - event: the work, run with the unit once it runs in the background (or foreground).
    /// - Returns: what `event` returned.
    /// - Throws: what `event` threw, or a ``LifeCycleError`` when the unit could not be woken
    ///   (its launch failed, the application terminated).
    @discardableResult
    public func deliverBackgroundEvent<Result: Sendable>(
        to id: LifeCycleUnit.ID, name: String = "background event",
        _ event: @escaping @Sendable (LifeCycleUnit) async throws -> Result
    ) async throws -> Result {
        let unit = try makeUnit(id)
        return try await unit.handleBackgroundEvent(name: name, event)
    }
}
